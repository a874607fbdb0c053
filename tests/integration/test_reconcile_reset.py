"""Reconcile never kills live work, against a Redis restarted empty (docs/delivery.md, "Reconcile after a reset").

One instance runs a step whose labelled child is live work; an orphan of the same service
has no owner. Redis restarts empty: for a moment no lease names either run. A second
instance starting then (the case a plain reconcile got wrong) waits until the owner's
heartbeat took its lease back, then cleans the orphan alone. The owner itself hears of
the reset from its heartbeat. The test owns its redis-server (conftest's `redis_server`).
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time

import redis.asyncio as aioredis
import structlog

from contracts.events import ProfileRequested
from services.runtime.delivery.consumer import Route, StepContext
from services.runtime.delivery.ledger import RedisLedger
from services.runtime.delivery.reconcile import Reconciler, settle_period_s
from services.runtime.delivery.service import bootstrap
from services.runtime.main import reconciler_for
from services.runtime.processes.procs import DEPLOYMENT_ENV, deployment_id, kill_group, labelled_processes, spawn
from services.runtime.settings import RuntimeSettings
from tests.integration.test_procs import alive, wait_dead

SERVICE = "svc-reset-reconcile"
SCHEMA = "profile.requested"
LIVE, ORPHAN = "toy-20261201-000000-aaaaaa", "toy-20261201-000000-bbbbbb"
SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]


async def _eventually(probe, what: str, timeout_s: float = 15.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = await probe() if asyncio.iscoroutinefunction(probe) else probe()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


async def test_a_reset_never_gets_live_work_killed(redis_server, tmp_path, monkeypatch) -> None:
    prefix = "reset"
    settings = RuntimeSettings(redis_url=redis_server.url, stream_prefix=prefix, bundle_root=tmp_path / "bundles",
                               instance="owner", reclaim_idle_ms=900, reclaim_poll_ms=100, read_block_ms=100)
    deployment = deployment_id(settings.redis_url, prefix)
    monkeypatch.setenv(DEPLOYMENT_ENV, deployment)
    release = asyncio.Event()
    children = []

    async def handler(event, ctx: StepContext):
        children.append(spawn(SLEEP, run_id=event.run_id, service=SERVICE))
        await release.wait()
        return []

    owner = bootstrap(SERVICE, [Route(SCHEMA, handler)], settings=settings)
    resets: list[str] = []
    owner.on_reset(resets.append)
    orphan = spawn(SLEEP, run_id=ORPHAN, service=SERVICE)
    settle_s = settle_period_s(settings.heartbeat_s)
    try:
        await owner.start()
        await owner.bus.publish(ProfileRequested(run_id=LIVE, producer="test", requested_by="test"))
        await _eventually(lambda: children and any(p.run_id == LIVE for p in labelled_processes(SERVICE)),
                          "the live child")
        live = children[0]

        redis_server.kill()
        shutil.rmtree(redis_server.directory)  # its AOF: it comes back with nothing
        redis_server.start()
        reset_at = time.monotonic()
        client = aioredis.Redis.from_url(redis_server.url)
        ledger = RedisLedger(client, prefix)
        assert await ledger.holders(SERVICE) == {}, "right after the reset no lease names the live run"

        # A second instance of the service starts now (a deploy, a crash loop).
        second = Reconciler(SERVICE, ledger, deployment=deployment, settle_s=settle_s,
                            log=structlog.get_logger().bind(service=SERVICE, instance="second"))
        assert await second.at_start() == [], "the ledger is new: nothing is cleaned before the owners beat"
        assert alive(orphan.pid) and alive(live.pid)
        assert second.pass_task is not None, "at_start schedules the pass"
        await asyncio.wait_for(second.pass_task, 10)
        assert time.monotonic() - reset_at >= settle_s
        assert [p.run_id for p in second.cleaned] == [ORPHAN]
        assert wait_dead(orphan.pid, 5), "the orphan is cleaned once the leases are back"
        assert alive(live.pid), "the live step's child survives the reset"
        assert any(LIVE in key for key in await ledger.holders(SERVICE)), "the owner re-registered its lease"
        assert any("had vanished" in reason for reason in resets), resets

        # The owner's own reconciler never cleans the run it is running, even with no lease left.
        own = reconciler_for(owner, deployment, structlog.get_logger())
        await ledger.client.delete(*[f"{prefix}:ledger:inflight:{key}" for key in await ledger.holders(SERVICE)])
        assert await own.run_pass() == [] and alive(live.pid)
        await client.aclose()
    finally:
        release.set()
        await owner.stop(grace_s=2)
        for proc in (orphan, *children):
            if proc.poll() is None:
                kill_group(proc.pid, grace_s=1)
            proc.wait()
