"""A finished step whose recording meets a dropped Redis connection is recorded, not run again.

After a Redis restart a pooled connection fails its first command. The handler's
work is done by then, so the consumer retries the writes that record it
(services/runtime/delivery/consumer.py `_recording`) instead of leaving the message pending
for a second run. In-memory ledger and bus: this is the consumer's own logic.
"""

from __future__ import annotations

import asyncio

import pytest
import structlog
from redis.exceptions import ConnectionError as RedisConnectionError

import contracts
from contracts.envelope import Event
from contracts.events import ProfileCompleted, ProfileRequested
from services.runtime.delivery import consumer as consumer_module
from services.runtime.delivery import route as route_module
from services.runtime.delivery.consumer import Consumer, Route
from services.runtime.delivery.ledger import MemoryLedger, StepKey
from services.runtime.settings import RuntimeSettings

REQUEST = ProfileRequested(run_id="toy-run-1", producer="t", requested_by="t")


class FlakyBus:
    """Fails its first `failures` publishes with a dropped connection, then works."""

    deadletter = "dlq"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.published: list[str] = []
        self.raw: list[str] = []

    async def publish(self, event) -> None:
        if self.failures:
            self.failures -= 1
            raise RedisConnectionError("Connection closed by server.")
        self.published.append(event.SCHEMA)

    async def publish_raw(self, stream, body, headers, correlation_id) -> None:
        self.raw.append(stream)


class OneDelivery:
    def __init__(self) -> None:
        self.acked = False
        self.stream = "s.profile.requested"
        self.consumer = "c"
        self.group = ""
        self.message_id = "1-0"
        self.body = REQUEST.to_json()

    async def delivery_count(self) -> int:
        return 1

    async def ack(self) -> None:
        self.acked = True


def run_once(bus: FlakyBus, ledger: MemoryLedger) -> list[str]:
    runs: list[str] = []

    async def handler(event, ctx):
        runs.append(event.event_id)  # the step's side effect
        ref = {"uri": f"bundle://{event.run_id}/profile/profile.json", "sha256": "0" * 64, "size_bytes": 0}
        return [event.caused(ProfileCompleted, producer="t", profile=ref, source="shapes", records_accepted=0,
                             records_rejected=0, recommended_method="ngram")]

    consumer = Consumer(service="svc", settings=RuntimeSettings(), registry=contracts.default_registry(),
                        ledger=ledger, bus=bus)  # type: ignore[arg-type]  # a flaky stand-in for the Bus
    asyncio.run(consumer.handle(Route("profile.requested", handler),
                                OneDelivery()))  # type: ignore[arg-type]  # a stand-in for Delivered
    return runs


@pytest.fixture(autouse=True)
def no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumer_module, "RECORD_RETRIES_S", (0.0, 0.0, 0.0))


def test_a_dropped_connection_while_recording_is_retried_and_the_step_is_done_once():
    ledger, bus = MemoryLedger(), FlakyBus(failures=2)
    runs = run_once(bus, ledger)
    assert runs == [REQUEST.event_id]
    assert bus.published == ["profile.completed"]
    assert [isinstance(key, StepKey) for key in ledger.done] == [True]
    # A redelivery now finds the step done: the handler does not run again.
    assert run_once(FlakyBus(failures=0), ledger) == []


def test_a_connection_that_stays_down_leaves_the_message_pending_as_before():
    ledger, bus = MemoryLedger(), FlakyBus(failures=10)
    assert run_once(bus, ledger) == [REQUEST.event_id]
    assert ledger.done == {} and bus.raw == []  # not recorded, not dead-lettered: a retry later


@pytest.mark.asyncio
async def test_a_progress_event_over_a_dropped_connection_is_retried_until_it_goes_out(monkeypatch):
    """StepContext.emit (a bench trial's event, mid-step) waits for Redis: a step retried later
    adopts the recorded work without announcing it again, so giving up would lose the event."""
    monkeypatch.setattr(route_module, "EMIT_RETRIES_S", (0.0, 0.0, 0.0))  # StepContext.emit reads it there
    bus = FlakyBus(failures=3)
    ctx = route_module.StepContext(service="svc", settings=RuntimeSettings(), bus=bus, log=structlog.get_logger())
    await ctx.emit(REQUEST)
    assert bus.published == [ProfileRequested.SCHEMA] and bus.failures == 0

    gone = FlakyBus(failures=4)  # one more failure than retries: the error reaches the handler
    ctx = route_module.StepContext(service="svc", settings=RuntimeSettings(), bus=gone, log=structlog.get_logger())
    with pytest.raises(RedisConnectionError):
        await ctx.emit(REQUEST)
    assert gone.published == []


class GroupDelivery(OneDelivery):
    """A delivery of a read batch: it has a group, so its finish can travel with the next entry's lease."""

    def __init__(self, message_id: str, event: Event = REQUEST) -> None:
        super().__init__()
        self.group = "svc"
        self.message_id = message_id
        self.body = event.to_json()


def test_a_batchs_finish_is_written_with_the_next_lease_or_by_flush():
    ledger, bus = MemoryLedger(), FlakyBus(failures=0)
    runs: list[str] = []

    async def handler(event, ctx):
        runs.append(event.event_id)
        return []

    consumer = Consumer(service="svc", settings=RuntimeSettings(), registry=contracts.default_registry(),
                        ledger=ledger, bus=bus)
    route = Route("profile.requested", handler)
    other = ProfileRequested(run_id="toy-run-2", producer="t", requested_by="t")
    duplicate = GroupDelivery("2-0")

    async def batch() -> None:
        await consumer.handle(route, GroupDelivery("1-0"), defer_finish=True)
        assert ledger.done == {}, "the finish waits for the next entry's lease"
        # The same event again, right behind it: the finish lands first, so it is a duplicate.
        await consumer.handle(route, duplicate, defer_finish=True)
        await consumer.handle(route, GroupDelivery("3-0", other), defer_finish=True)
        assert len(ledger.done) == 1
        await consumer.flush()

    asyncio.run(batch())
    assert runs == [REQUEST.event_id, other.event_id], "each step ran once"
    assert duplicate.acked, "the duplicate was acked as done"
    assert len(ledger.done) == 2 and not ledger.inflight, "flush wrote the last finish and dropped its lease"
