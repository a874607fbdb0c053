"""The CLI survives a dropped connection (services/app: `follow`, `connect`, `patiently`).

`watch`, `status` and the demo's follower read Redis through these; a Redis restart of a
few seconds must not end them: they retry with backoff, say so in one line when Redis goes
and one when it is back, and go on. Each test owns its redis-server (conftest's `redis_server`).
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import time

import pytest
import redis

from contracts.envelope import Event
from contracts.events import ProfileRequested
from services.app.context import connect, patiently
from services.app.runs.streams import follow
from services.runtime.errors import BrokerUnavailable
from services.runtime.settings import RuntimeSettings
from tests.integration.test_delivery import publish

PREFIX = "reconnect"


def event(n: int) -> Event:
    return ProfileRequested(run_id=f"toy-20261201-00000{n}-cafe0{n}", producer="test", requested_by="test")


@pytest.mark.parametrize("empty", [False, True], ids=["restart", "restart-empty"])
async def test_follow_rides_out_a_redis_restart(redis_server, empty: bool) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(redis_server.url)
    sync = redis.Redis.from_url(redis_server.url)
    notices: list[str] = []
    seen: list[str] = []

    async def follower() -> None:
        async for data in follow(client, PREFIX, from_start=True, block_ms=100, notice=notices.append):
            if data is not None:
                seen.append(str(data["run_id"]))

    task = asyncio.create_task(follower())
    try:
        first, second = event(1), event(2)
        await asyncio.to_thread(publish, sync, PREFIX, first)
        await _until(lambda: seen == [first.run_id], "the event before the restart")

        sync.close()
        redis_server.kill()
        if empty:
            shutil.rmtree(redis_server.directory)
        await asyncio.sleep(2.0)  # Redis away for a few seconds
        assert not task.done(), "the follower must not die with the connection"
        await asyncio.to_thread(redis_server.start)
        sync = redis.Redis.from_url(redis_server.url)
        await asyncio.to_thread(publish, sync, PREFIX, second)
        await _until(lambda: second.run_id in seen, "the event after the restart")
        assert seen.count(second.run_id) == 1
        assert len(notices) == 2, notices
        assert notices[0].startswith("lost Redis while following events") and "retrying with backoff" in notices[0]
        assert notices[1].startswith("Redis answers again after ")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.aclose()
        sync.close()


async def test_connect_waits_for_redis_and_says_so(redis_server, tmp_path) -> None:
    settings = RuntimeSettings(redis_url=redis_server.url, stream_prefix=PREFIX, bundle_root=tmp_path / "bundles")
    redis_server.kill()
    threading.Timer(1.0, redis_server.start).start()
    notices: list[str] = []
    started = time.monotonic()
    async with connect(settings, notice=notices.append) as session:
        assert await session.client.ping()
    assert 0.9 < time.monotonic() - started < 10
    assert len(notices) == 2 and "does not answer" in notices[0] and notices[1].startswith("Redis answers again")


async def test_connect_gives_up_after_its_patience_in_one_line(redis_server, tmp_path) -> None:
    settings = RuntimeSettings(redis_url=redis_server.url, stream_prefix=PREFIX, bundle_root=tmp_path / "bundles")
    redis_server.kill()
    notices: list[str] = []
    with pytest.raises(BrokerUnavailable, match=r"did not answer within 0\.6 s .*SPECDEC_REDIS_URL"):
        async with connect(settings, notice=notices.append, patience_s=0.6):
            pass
    assert len(notices) == 1
    redis_server.start()  # the fixture stops what it started


async def test_a_read_is_repeated_while_redis_is_away() -> None:
    attempts: list[float] = []
    notices: list[str] = []

    async def read() -> str:
        attempts.append(time.monotonic())
        if len(attempts) < 3:
            raise redis.exceptions.ConnectionError("Connection refused")
        return "events"

    assert await patiently(read, notice=notices.append, what="reading run r") == "events"
    assert len(attempts) == 3 and len(notices) == 2 and "reading run r" in notices[0]


async def _until(probe, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if probe():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
