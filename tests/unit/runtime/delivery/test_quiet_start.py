"""Quiet when healthy: a fresh Redis is no lost one, and a step running here is not a run waiting.

A young ledger at start warns that Redis lost its leases only when something says Redis held this
deployment's state (services/runtime/delivery/history.py): the deployment's marker names an earlier
ledger birth, or the bundle holds a run not finished. Catch-up (catchup.py) says nothing of a step
its own instance is running. Real Redis (the test's own prefix), a real bundle.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import redis.asyncio as aioredis

from contracts.events import ProfileRequested
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery import history
from services.runtime.delivery.catchup import CatchUp
from services.runtime.delivery.consumer import Route
from services.runtime.delivery.ledger import RedisLedger, StepKey
from services.runtime.delivery.reconcile import Reconciler
from services.runtime.delivery.service import bootstrap
from services.runtime.main import resources_for
from services.runtime.settings import RuntimeSettings

SERVICE = "svc-quiet"
RUN = "toy-20261207-000000-quiet1"


class Lines:
    """A logger that keeps (level, message) of each line."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def bind(self, **_: Any) -> Lines:
        return self

    def __getattr__(self, level: str) -> Any:
        return lambda message, **fields: self.lines.append((level, message, fields))

    def at(self, *levels: str) -> list[str]:
        return [message for level, message, _ in self.lines if level in levels]


async def start(redis_url: str, prefix: str, bundle: BundleStore) -> Lines:
    """What a service's start says of the ledger (main.py's wiring): its reconcile's first pass, then the mark."""
    client = aioredis.Redis.from_url(redis_url)
    ledger, log, deployment = RedisLedger(client, prefix), Lines(), f"{prefix}@test"
    reconciler = Reconciler(SERVICE, ledger, deployment=deployment, settle_s=60.0, log=log, scan=lambda *a, **k: [],
                            lost_state=lambda: history.ledger_lost_state(ledger, bundle, deployment))
    try:
        assert await reconciler.at_start() == []
        assert reconciler.settled_in_s(reconciler.clock()) > 0, "a young ledger is waited out, fresh or not"
        await history.mark_ledger(ledger, bundle, deployment)
    finally:
        await reconciler.close()
        await client.aclose()
    return log


async def test_a_fresh_redis_is_said_at_info_and_a_lost_one_warned(redis_url: str, prefix: str, tmp_path) -> None:
    bundle = BundleStore(tmp_path / "bundles", fsync=False)
    first = await start(redis_url, prefix, bundle)
    assert first.at("warning", "error") == [] and any("no state of this deployment" in m for m in first.at("info"))
    # Another instance of the same Redis life (the ledger still young): still fresh.
    assert (await start(redis_url, prefix, bundle)).at("warning") == []
    # Redis loses its state (a restart with nothing on disk): the marker names the earlier birth.
    client = aioredis.Redis.from_url(redis_url)
    await client.delete(f"{prefix}:ledger:born")
    await asyncio.sleep(0.01)  # a later birth on Redis's clock
    await client.aclose()
    [warned] = (await start(redis_url, prefix, bundle)).lines[:1]
    assert warned[0] == "warning" and "lost its leases" in warned[1] and "born earlier" in warned[2]["reason"]


async def test_a_run_in_flight_in_the_bundle_means_redis_held_state(redis_url: str, prefix: str, tmp_path) -> None:
    bundle = BundleStore(tmp_path / "bundles", fsync=False)
    trigger = ProfileRequested(run_id=RUN, producer="test", requested_by="test")
    bundle.append_event(RUN, trigger.event_id, trigger.to_json())
    [warned] = (await start(redis_url, prefix, bundle)).at("warning")
    assert "lost its leases" in warned
    # The same run finished: nothing waits on Redis, and a new ledger (another prefix) is a fresh one.
    bundle.append_event(RUN, "published", orjson.dumps({"event_id": "published", "schema": "report.published"}))
    assert (await start(redis_url, f"{prefix}b", bundle)).at("warning") == []


async def test_catch_up_says_nothing_of_a_step_running_in_its_own_instance(settings: RuntimeSettings, tmp_path) -> None:
    bundle = BundleStore(settings.bundle_root, fsync=False)
    ran: list[str] = []

    async def step(event, ctx):  # the route's signature
        ran.append(event.event_id)
        return []

    route = Route("profile.requested", step, outputs=("profile.completed",))
    service = bootstrap(SERVICE, [route], settings=settings, resources=resources_for(settings, bundle=bundle))
    trigger = ProfileRequested(run_id=RUN, producer="test", requested_by="test")
    bundle.append_event(RUN, trigger.event_id, trigger.to_json())
    await service.broker.connect()
    try:
        log = Lines()
        catchup = CatchUp(service, bundle, log)
        service.consumer.running.add(StepKey(SERVICE, RUN, trigger.SCHEMA, route.step_key(trigger)))
        assert await catchup.run_pass() == 0 and ran == [] and log.at("warning", "error") == []
        service.consumer.running.clear()  # not running here: the run waits on this service
        assert await catchup.run_pass() == 1 and ran == [trigger.event_id]
        assert any("taking it up from the bundle" in m for m in log.at("warning"))
    finally:
        await service.stop(grace_s=1)
