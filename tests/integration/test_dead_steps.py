"""A dead-lettered step stays dead across restarts and resets until `specdec dlq replay` (docs/delivery.md,
"Dead steps stay dead").

Catch-up (services/runtime/delivery/catchup.py) takes up every step the bundle knows and nothing says
is done. A poison step is never done: without a durable mark it was taken up again on every start and
after every detected reset, one delivery each time, for ever. Real Redis (the test's own prefix), a real
bundle, real service instances started one after another as a restart would.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

import orjson
import redis.asyncio as aioredis
import structlog

from contracts.events import ProfileCompleted, ProfileRequested
from services.app.context import connect
from services.app.runs.ops import dlq_list, dlq_replay
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.catchup import CatchUp
from services.runtime.delivery.consumer import Route, StepContext
from services.runtime.delivery.service import Service, bootstrap
from services.runtime.main import resources_for
from services.runtime.settings import RuntimeSettings

SERVICE = "svc-poison"
RUN = "toy-20261203-000000-dead01"


class Poison:
    """A profiler-like step that raises while `poison` is set, and completes once it is not."""

    def __init__(self, bundle: BundleStore) -> None:
        self.bundle = bundle
        self.poison = True
        self.runs: list[str] = []

    async def __call__(self, event, ctx: StepContext):
        self.runs.append(event.event_id)
        if self.poison:
            raise RuntimeError("poison input")
        ref = self.bundle.write_json(event.run_id, "profile/profile.json", {"ok": True})
        return [event.caused(ProfileCompleted, producer=f"{SERVICE}/t", profile=ref, source="shapes",
                             records_accepted=0, records_rejected=0, recommended_method="ngram")]


def instance(settings: RuntimeSettings, bundle: BundleStore, step: Poison, name: str) -> Service:
    settings = settings.model_copy(update={"instance": name})
    route = Route("profile.requested", step, outputs=("profile.completed",))
    return bootstrap(SERVICE, [route], settings=settings, resources=resources_for(settings, bundle=bundle))


async def catch_up_after_restart(settings: RuntimeSettings, bundle: BundleStore, step: Poison, name: str) -> list:
    """A fresh instance (a restart) runs one catch-up pass; what it took up."""
    service = instance(settings, bundle, step, name)
    await service.broker.connect()
    try:
        catchup = CatchUp(service, bundle, structlog.get_logger().bind(instance=name))
        await catchup.run_pass()
        return catchup.taken_up
    finally:
        await service.stop(grace_s=1)


async def wait_until(probe, what: str, timeout_s: float = 20.0):
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        value = await probe()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


async def completions(client: aioredis.Redis, prefix: str) -> list[dict]:
    from services.runtime.delivery.broker import decode_entry

    # redis-py types replies for decode_responses too; this client's are bytes
    entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", await client.xrange(f"{prefix}.profile.completed"))
    return [orjson.loads(decode_entry(fields)[0]) for _, fields in entries]


async def test_a_dead_lettered_step_stays_dead_across_restarts_and_resets_until_replayed(
        settings: RuntimeSettings, prefix: str, tmp_path: Path) -> None:
    settings = settings.model_copy(update={"max_deliveries": 2})
    bundle = BundleStore(settings.bundle_root, fsync=False)
    step = Poison(bundle)
    trigger = ProfileRequested(run_id=RUN, producer="test", requested_by="test")
    bundle.append_event(RUN, trigger.event_id, trigger.to_json())  # the journal knows the trigger
    client = aioredis.Redis.from_url(settings.redis_url)
    first = instance(settings, bundle, step, "first")
    try:
        await first.start()
        await first.bus.publish(trigger)
        # Delivery 1 raises; the reclaimer's delivery 2 raises on the last allowed delivery: dead-lettered.
        await wait_until(lambda: client.xlen(f"{prefix}.deadletter"), "the dead letter")
    finally:
        await first.stop(grace_s=1)
    assert len(step.runs) == 2

    # A restart: the new instance's catch-up finds the trigger in the journal and no outcome of the step.
    assert await catch_up_after_restart(settings, bundle, step, "second") == []
    # A reset: Redis lost the ledger (and with it every error and done mark); the bundle still says dead.
    await client.delete(*[key async for key in client.scan_iter(match=f"{prefix}:ledger:*")])
    assert await catch_up_after_restart(settings, bundle, step, "third") == []
    assert len(step.runs) == 2, "a dead-lettered step ran again without a replay"

    # The operator fixes the cause and replays the dead letter: the step runs, once.
    step.poison = False
    async with connect(settings) as session:
        [letter] = await dlq_list(session)
        await dlq_replay(session, letter.record["dead_letter_id"])
    assert await catch_up_after_restart(settings, bundle, step, "fourth") == [(RUN, "profile.requested")]
    assert len(step.runs) == 3
    assert [e["causation_id"] for e in await completions(client, prefix)] == [trigger.event_id]
    await client.aclose()


async def test_catch_up_counts_its_deliveries_durably(settings: RuntimeSettings, prefix: str, tmp_path: Path) -> None:
    # No stream entry at all (Redis lost it): only catch-up delivers the step, one pass per restart.
    settings = settings.model_copy(update={"max_deliveries": 2})
    bundle = BundleStore(settings.bundle_root, fsync=False)
    step = Poison(bundle)
    trigger = ProfileRequested(run_id=RUN, producer="test", requested_by="test")
    bundle.append_event(RUN, trigger.event_id, trigger.to_json())
    taken = [await catch_up_after_restart(settings, bundle, step, f"restart-{n}") for n in range(4)]
    assert len(step.runs) == 2, f"ran {len(step.runs)} times over 4 restarts with max_deliveries 2"
    assert [len(t) for t in taken] == [1, 1, 0, 0]
    async with connect(settings) as session:
        [letter] = await dlq_list(session)
    assert letter.record["kind"] == "failed" and letter.record["delivery_count"] == 2
    assert "poison input" in letter.record["error"]
