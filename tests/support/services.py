"""Running a service in-process against a real Redis, for integration tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
import redis.asyncio as aioredis

from contracts.envelope import Event
from services.runtime import apps
from services.runtime.delivery.broker import decode_entry
from services.runtime.delivery.service import Service, bootstrap
from services.runtime.main import resources_for
from services.runtime.settings import RuntimeSettings
from tests.support.stream_entries import entries


@asynccontextmanager
async def running(name: str, settings: RuntimeSettings) -> AsyncIterator[Service]:
    """Start the registered service `name` in this event loop; stop it afterwards."""
    resources = resources_for(settings)
    service = bootstrap(name, apps.load(name).routes(resources), settings=settings, resources=resources)
    await service.start()
    try:
        yield service
    finally:
        await service.stop(grace_s=1.0)


async def wait_events(
    settings: RuntimeSettings, schemas: set[str], *, run_id: str, timeout_s: float = 30.0
) -> dict[str, dict[str, Any]]:
    """Wait until one event of each schema (for the run) is on its stream; return them."""
    client = aioredis.Redis.from_url(settings.redis_url)
    found: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for schema in schemas - set(found):
                for _, fields in entries(await client.xrange(f"{settings.stream_prefix}.{schema}")):
                    data = orjson.loads(decode_entry(fields)[0])
                    if data.get("run_id") == run_id:
                        found[schema] = data
            if set(found) == schemas or any(s.endswith(".failed") for s in found):
                return found
            await asyncio.sleep(0.1)
    finally:
        await client.aclose()
    raise AssertionError(f"timed out waiting for {sorted(schemas - set(found))} of {run_id}; saw {sorted(found)}")


async def publish(service: Service, event: Event) -> None:
    await service.bus.publish(event)


async def publish_approval(settings: RuntimeSettings, event: Event) -> None:
    """Publish a run.approved event as an operator does: through the operator's Redis user (the
    services' user may not write the approval stream)."""
    from services.app.context import approver_settings
    from services.runtime.delivery.broker import Bus, make_broker

    operator = approver_settings(settings)
    broker = make_broker(operator)
    await broker.connect()
    try:
        await Bus(broker, operator.stream_prefix).publish(event)
    finally:
        await broker.stop()
