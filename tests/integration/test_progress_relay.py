"""Progress through a real Redis: the trainer-proxy relays its trainer's printed steps as step.progress events
on their capped stream, done increasing to the total, rate-limited, never journaled; `watch` hands them on typed."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import cast

import orjson
import redis.asyncio as aioredis

from contracts.campaign.commands import TrainProgress
from contracts.events import CapacitySelected
from contracts.progress import StepProgress
from contracts.streams import PROGRESS_SCHEMA
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.broker import decode_entry
from services.runtime.delivery.service import bootstrap
from services.runtime.main import resources_for
from services.shared.capacity.recheck import Recheck
from services.trainer_proxy import app
from tests.support.services import wait_events
from tests.unit.trainer_proxy.helpers import PY, campaign, seed_run, write_script

# Three steps in about a second: the relay sends the first at once and holds the second back
# (within its 2 s), and the trainer's end forces the last one out.
TRAINER = """
    import json, time
    for step in (1, 2, 3):
        print(json.dumps({"step": step, "total": 3, "loss": 2.0 / step}), flush=True)
        if step < 3:
            time.sleep(0.5)
"""


def idle(bundle, camp, node, run_id) -> Recheck:
    return Recheck(idle=True, reasons=[], snapshot=None)


async def progress_events(settings, run_id: str) -> list[dict]:
    client = aioredis.Redis.from_url(settings.redis_url)
    try:
        stream = f"{settings.stream_prefix}.{PROGRESS_SCHEMA}"
        # redis-py types replies for decode_responses too; this client's are bytes
        entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", await client.xrange(stream))
    finally:
        await client.aclose()
    events = [orjson.loads(decode_entry(fields)[0]) for _, fields in entries]
    return [event for event in events if event["run_id"] == run_id]


async def test_the_trainer_proxy_relays_the_trainers_steps_as_progress_events(settings, tmp_path):
    run_id = f"tp-{uuid.uuid4().hex[:10]}"
    bundle = BundleStore(settings.bundle_root)
    trainer = write_script(tmp_path / "steps.py", TRAINER)
    target = tmp_path / "target"
    target.mkdir()
    camp = campaign(train_argv=[PY, str(trainer)], target=str(target), pre_approved=True)
    camp.commands.train.progress = TrainProgress(format="json")
    seed_run(bundle, run_id, camp)
    resources = resources_for(settings, bundle=bundle, training_recheck=idle)
    service = bootstrap(app.NAME, app.routes(resources), settings=settings, resources=resources)
    await service.start()
    started = time.monotonic()
    try:
        snapshot = bundle.write_json(run_id, "capacity/snapshot.json", {"node": "local-node"})
        await service.bus.publish(CapacitySelected(run_id=run_id, producer="test", scheduler="local",
                                                   node="local-node", snapshot=snapshot))
        # The stand-in target has no weights: the probes fail after the trainer ran, which is all this needs.
        await wait_events(settings, {"training.started", "training.completed", "training.failed"}, run_id=run_id,
                          timeout_s=30)
    finally:
        await service.stop(grace_s=1.0)
    events = [StepProgress.model_validate(e) for e in await progress_events(settings, run_id)]
    done = [e.done for e in events]
    assert done == sorted(done) and done[0] >= 1 and done[-1] == 3, done
    assert len(events) < 3, f"three steps within 2 s are rate-limited to the first and the last: {done}"
    last = events[-1]
    assert (last.step, last.unit, last.total, last.loss, last.eta_s) == ("training", "step", 3, 2.0 / 3, 0.0)
    assert 0.9 <= last.elapsed_s < time.monotonic() - started + 1
    assert all(e.producer.startswith("trainer-proxy/") for e in events)
    # Not evidence: nothing of it in the run's journal (no consumer group reads the stream).
    client = aioredis.Redis.from_url(settings.redis_url)
    try:
        groups = await client.xinfo_groups(f"{settings.stream_prefix}.{PROGRESS_SCHEMA}")
    finally:
        await client.aclose()
    assert groups == []


async def test_watch_hands_progress_on_typed_beside_the_runs_events(settings):
    from services.app.context import connect
    from services.app.runs.ops import watch

    run_id = f"tp-{uuid.uuid4().hex[:10]}"
    seen: list[StepProgress] = []
    lines: list[str] = []
    async with connect(settings) as session:
        async def publish() -> None:
            await asyncio.sleep(0.3)
            for done in (1, 2):
                await session.bus.publish(StepProgress(run_id=run_id, producer="bench-runner/t", step="bench",
                                                       done=done, total=4, unit="trial", loss=None, eta_s=10.0,
                                                       elapsed_s=1.0))

        task = asyncio.create_task(publish())
        await watch(session, run_id, on_event=lambda e: lines.append(e.schema_name), on_progress=seen.append,
                    from_start=False, timeout_s=0.8)
        await task
    assert [p.done for p in seen] == [1, 2] and all(isinstance(p, StepProgress) for p in seen)
    assert lines == [], "progress is not one of the run's events"
