"""One handler test, run against faststream's in-memory TestRedisBroker and
against a real Redis: the in-memory path must behave like the real one for
what unit tests rely on (handler runs once, duplicates skipped, StepFailed
becomes `<step>.failed`, an invalid payload is dead-lettered)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any, cast

import orjson
import pytest
import redis.asyncio as aioredis
from faststream.redis import TestRedisBroker

from contracts.envelope import Event
from contracts.events import ProfileCompleted, ProfileRequested
from services.runtime.delivery.broker import decode_entry
from services.runtime.delivery.consumer import Route, StepContext
from services.runtime.delivery.service import Service, bootstrap
from services.runtime.errors import StepFailed
from services.runtime.settings import RuntimeSettings

RUN = "toy-20260101-000000-abcdef"
SERVICE = "probe"
OUTPUTS = ("profile.completed", "profile.failed", "deadletter")


class Counting:
    """The handler under test: counts its calls; `reason="fail"` raises StepFailed."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, event: Any, ctx: StepContext) -> list[Any]:
        self.calls.append(event.event_id)
        if event.reason == "fail":
            raise StepFailed("the traffic file is empty; point traffic.path at a JSONL file", error_type="EmptyTraffic")
        ref = {"uri": f"bundle://{event.run_id}/profile/p.json", "sha256": "0" * 64, "size_bytes": 0}
        return [event.caused(ProfileCompleted, producer=ctx.service, profile=ref, source="shapes",
                             records_accepted=0, records_rejected=0, recommended_method="ngram")]


def routes(handler: Counting) -> list[Route]:
    # One step per (run, schema, reason): the failing request is its own step.
    return [Route("profile.requested", handler,
                  step_key=lambda event: event.reason or "step")]  # type: ignore[attr-defined]  # a ProfileRequested


class InMemory:
    """bootstrap(in_memory=True) under TestRedisBroker; publish runs the handler inline."""

    def __init__(self, settings: RuntimeSettings, handler: Counting) -> None:
        self.service = bootstrap(SERVICE, routes(handler), settings=settings, in_memory=True)
        self.seen: dict[str, list[bytes]] = {schema: [] for schema in OUTPUTS}
        for schema in OUTPUTS:
            self._collect(schema)

    def _collect(self, schema: str) -> None:
        bucket = self.seen[schema]

        context = self.service.broker.context

        # specdec's broker runs without argument injection: the raw message
        # comes from faststream's context, as in services/runtime/delivery/service.py.
        async def collect(body: Any) -> None:
            bucket.append(context.get_local("message").body)

        collect.__name__ = f"collect_{schema}"
        self.service.broker.subscriber(stream=self.service.bus.stream_of(schema))(collect)

    async def __aenter__(self) -> InMemory:
        self._ctx = TestRedisBroker(self.service.broker)
        await self._ctx.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._ctx.__aexit__(*exc)

    async def publish(self, event: Any) -> None:
        await self.service.bus.publish(event)

    async def publish_raw(self, body: bytes) -> None:
        await self.service.bus.publish_raw(self.service.bus.stream_of("profile.requested"), body, {}, "raw-1")

    async def outputs(self, schema: str) -> list[dict[str, Any]]:
        return [orjson.loads(body) for body in self.seen[schema]]


class RealRedis:
    """The same service on a real Redis; publish returns once the group has acked it."""

    def __init__(self, settings: RuntimeSettings, handler: Counting) -> None:
        self.service: Service = bootstrap(SERVICE, routes(handler), settings=settings)
        self.client = aioredis.Redis.from_url(settings.redis_url)
        self.stream = self.service.bus.stream_of("profile.requested")
        self.published = 0

    async def __aenter__(self) -> RealRedis:
        await self.service.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.service.stop(grace_s=1)
        await self.client.aclose()

    async def _settled(self) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            group = next(g for g in await self.client.xinfo_groups(self.stream) if g["name"] == SERVICE.encode())
            if group["entries-read"] == self.published and group["pending"] == 0:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"the service did not ack all {self.published} messages within 15 s")

    async def publish(self, event: Any) -> None:
        await self.service.bus.publish(event)
        self.published += 1
        await self._settled()

    async def publish_raw(self, body: bytes) -> None:
        await self.service.bus.publish_raw(self.stream, body, {}, "raw-1")
        self.published += 1
        await self._settled()

    async def outputs(self, schema: str) -> list[dict[str, Any]]:
        # What XRANGE returns on a client without decode_responses.
        entries = cast(list[tuple[bytes, dict[bytes, bytes]]],
                       await self.client.xrange(self.service.bus.stream_of(schema)))
        return [orjson.loads(decode_entry(fields)[0]) for _, fields in entries]


@pytest.fixture
def handler() -> Counting:
    return Counting()


@pytest.fixture(params=["in-memory", "redis"])
async def harness(request: pytest.FixtureRequest, handler: Counting, tmp_path) -> AsyncIterator[Any]:
    async with AsyncExitStack() as stack:
        if request.param == "in-memory":
            settings = RuntimeSettings(stream_prefix="mem", instance="unit-1", bundle_root=tmp_path / "bundles")
            yield await stack.enter_async_context(InMemory(settings, handler))
        else:
            settings = request.getfixturevalue("settings")
            yield await stack.enter_async_context(RealRedis(settings, handler))


def request_event(**fields: Any) -> Event:
    return ProfileRequested(run_id=RUN, producer="test/1", requested_by="test", **fields)


async def test_the_handler_runs_once_and_emits_its_output(harness, handler):
    event = request_event()
    await harness.publish(event)
    assert handler.calls == [event.event_id]
    [completed] = await harness.outputs("profile.completed")
    assert completed["causation_id"] == event.event_id
    assert completed["run_id"] == RUN


async def test_a_second_publish_of_the_same_event_is_skipped_as_a_duplicate(harness, handler):
    event = request_event()
    await harness.publish(event)
    await harness.publish(event)
    # Another event of the same step key is a duplicate too.
    await harness.publish(request_event())
    assert handler.calls == [event.event_id]
    assert len(await harness.outputs("profile.completed")) == 1


async def test_step_failed_becomes_a_failed_event_with_the_reason(harness, handler):
    event = request_event(reason="fail")
    await harness.publish(event)
    assert handler.calls == [event.event_id]
    [failed] = await harness.outputs("profile.failed")
    assert failed["schema"] == "profile.failed"
    assert failed["step"] == "profile"
    assert failed["reason"] == "the traffic file is empty; point traffic.path at a JSONL file"
    assert failed["error_type"] == "EmptyTraffic"
    assert failed["causation_id"] == event.event_id
    assert await harness.outputs("profile.completed") == []
    # A failed step is finished: the same request again is not retried.
    await harness.publish(event)
    assert handler.calls == [event.event_id]


async def test_an_invalid_payload_is_dead_lettered_without_running_the_handler(harness, handler):
    await harness.publish_raw(b'{"schema": "profile.requested", "version": 1, "run_id": "NOT A RUN"}')
    assert handler.calls == []
    [record] = await harness.outputs("deadletter")
    assert record["kind"] == "invalid"
    assert record["service"] == SERVICE
    assert "run_id" in record["reason"]
    assert orjson.loads(record["payload"])["run_id"] == "NOT A RUN"
