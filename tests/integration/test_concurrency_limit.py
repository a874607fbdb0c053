"""SPECDEC_MAX_CONCURRENCY holds for a stream however its entries arrive (docs/delivery.md, "Groups and instances").

A stream has two subscribers that start handlers: the reader (new entries) and the reclaimer
(entries another instance left pending). Both are fed at once here: entries a dead consumer left
pending and idle, and new ones. The handler records how many copies of it run at once. Real Redis
(the test's own prefix), one service instance in the test's process.
"""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from contracts.envelope import Event
from contracts.events import ProfileRequested
from services.runtime.delivery.consumer import Route, StepContext
from services.runtime.delivery.service import bootstrap
from services.runtime.settings import RuntimeSettings

SERVICE = "svc-limit"
HANDLER_S = 0.3


class Counting:
    """A handler that records how many of its copies run at once, and which events it handled."""

    def __init__(self) -> None:
        self.now = self.peak = 0
        self.handled: list[str] = []

    async def __call__(self, event, ctx: StepContext):
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(HANDLER_S)
        finally:
            self.now -= 1
        self.handled.append(event.event_id)
        return []


def requests(count: int, tag: str) -> list[Event]:
    # One run each: distinct step keys, so nothing is a duplicate of anything else.
    return [ProfileRequested(run_id=f"toy-20261203-00000{i}-{tag}", producer="test", requested_by="test")
            for i in range(count)]


@pytest.mark.parametrize("limit", [1, 2])
async def test_the_limit_covers_the_reader_and_the_reclaimer_together(settings: RuntimeSettings, prefix: str,
                                                                       limit: int) -> None:
    settings = settings.model_copy(update={"max_concurrency": limit})
    counting = Counting()
    service = bootstrap(SERVICE, [Route("profile.requested", counting)], settings=settings)
    stream = f"{prefix}.profile.requested"
    client = aioredis.Redis.from_url(settings.redis_url)
    try:
        # Entries a dead instance read and never finished: pending, idle past the reclaim idle time.
        await client.xgroup_create(stream, SERVICE, id="0", mkstream=True)
        orphans = requests(2 * limit, "orphan")
        await service.broker.connect()
        for event in orphans:
            await service.bus.publish(event)
        await client.xreadgroup(SERVICE, "dead-instance", {stream: ">"}, count=len(orphans))
        await asyncio.sleep(settings.reclaim_idle_ms / 1000 + 0.2)
        fresh = requests(2 * limit, "fresh1")
        for event in fresh:
            await service.bus.publish(event)

        await service.start()
        deadline = asyncio.get_running_loop().time() + 30
        while len(counting.handled) < len(orphans) + len(fresh):
            assert asyncio.get_running_loop().time() < deadline, f"handled only {counting.handled}"
            await asyncio.sleep(0.05)
        assert sorted(counting.handled) == sorted(e.event_id for e in orphans + fresh), "each handled once"
        assert counting.peak <= limit, f"{counting.peak} handlers at once with SPECDEC_MAX_CONCURRENCY={limit}"
    finally:
        await service.stop(grace_s=1)
        await client.aclose()
