"""Streams are trimmed once the journal holds their entries (services/journal/trim.py).

Issue 40, scenario 8: nothing trimmed the streams, so Redis grew until it was killed. The journal
now cuts each stream below its oldest entry that some consumer group still needs: pending in a
group, not yet delivered to it, or not yet journaled; a stream whose reader has no group yet (its
service never started) is left whole, since that group will be created at 0 and read it all.
Real Redis, real consumer groups; the running-journal test runs the journal service in-process.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

import pytest
import redis

from contracts.events import ProfileRequested
from services.runtime.bundle.bundle import BundleStore
from services.runtime.settings import RuntimeSettings
from tests.support.publishing import publish_event
from tests.support.waiting import wait_for


@pytest.fixture
def client(redis_url: str):
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def ids(client: redis.Redis, stream: str) -> list[bytes]:
    # redis-py types replies for decode_responses too; this client's are bytes
    return [entry_id for entry_id, _ in cast("list[tuple[bytes, dict[bytes, bytes]]]", client.xrange(stream))]


def take(client: redis.Redis, stream: str, group: str, count: int) -> list[bytes]:
    """Deliver `count` new entries to one consumer of `group`; their IDs (left pending)."""
    reply = client.xreadgroup(group, f"{group}-1", {stream: ">"}, count=count)
    [(_, entries)] = cast("list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]", reply)  # one stream, as xrange
    return [entry_id for entry_id, _ in entries]


def trim(redis_url: str, prefix: str, schema: str, retain_ms: int = 0) -> int:
    from services.journal.trim import trim_stream

    async def go() -> int:
        import redis.asyncio as aioredis

        c = aioredis.Redis.from_url(redis_url)
        try:
            return await trim_stream(c, prefix, schema, retain_ms=retain_ms)
        finally:
            await c.aclose()

    return asyncio.run(go())


def test_trim_cuts_only_what_every_group_has_acked(client: redis.Redis, redis_url: str, prefix: str) -> None:
    stream = f"{prefix}.profile.requested"
    added = [client.xadd(stream, {"n": str(i)}) for i in range(6)]

    assert trim(redis_url, prefix, "profile.requested") == 0, "no journal group yet: nothing is journaled"
    client.xgroup_create(stream, "journal", id="0")
    client.xack(stream, "journal", *take(client, stream, "journal", 6))
    assert trim(redis_url, prefix, "profile.requested") == 0, \
        "the profiler (the stream's reader) has no group yet: it will read the stream from 0"
    assert ids(client, stream) == added

    client.xgroup_create(stream, "profiler", id="0")
    delivered = take(client, stream, "profiler", 4)
    client.xack(stream, "profiler", *delivered[:2])
    assert trim(redis_url, prefix, "profile.requested", retain_ms=3_600_000) == 0, "younger than the retention"
    assert trim(redis_url, prefix, "profile.requested") == 2
    assert ids(client, stream) == added[2:], "pending (3rd, 4th) and undelivered (5th, 6th) entries stay"

    client.xack(stream, "profiler", *delivered[2:])
    late = client.xadd(stream, {"n": "6"})  # not yet journaled
    client.xack(stream, "profiler", *take(client, stream, "profiler", 3))
    assert trim(redis_url, prefix, "profile.requested") == 4
    assert ids(client, stream) == [late], "only the entry the journal has not read stays"

    client.xgroup_create(stream, "someone", id="0")  # any other group counts too
    client.xack(stream, "journal", *take(client, stream, "journal", 1))
    assert trim(redis_url, prefix, "profile.requested") == 0
    assert ids(client, stream) == [late]


def test_the_running_journal_trims_what_it_journaled_and_sweeps_quiet_streams(
    client: redis.Redis, settings: RuntimeSettings, redis_url: str, prefix: str,
    *, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    from services.journal import trim as trim_module
    from tests.support.services import running

    monkeypatch.setattr(trim_module, "INTERVAL_S", 0.0)  # trim on every event, so the test need not wait
    monkeypatch.setattr(trim_module, "SWEEP_S", 0.2)
    settings = settings.model_copy(update={"stream_retention_s": 0.0})
    stream, run = f"{prefix}.profile.requested", "trim-run-1"
    bundle = BundleStore(settings.bundle_root, fsync=False)
    client.xgroup_create(stream, "profiler", id="0", mkstream=True)  # as the profiler does when it starts

    def journaled() -> int:
        return len(bundle.events(run)) if bundle.events_path(run).exists() else 0

    async def go() -> None:
        async with running("journal", settings):
            events = [ProfileRequested(run_id=run, producer="cli/t", requested_by="t") for _ in range(5)]
            for event in events:
                await asyncio.to_thread(publish_event, redis_url, prefix, event)
            await asyncio.to_thread(wait_for, lambda: journaled() == 5, 30, "the journal to take 5 events")
            assert client.xlen(stream) == 5, "the profiler has read none of them: all stay"
            client.xack(stream, "profiler", *take(client, stream, "profiler", 5))
            last = ProfileRequested(run_id=run, producer="cli/t", requested_by="t")
            await asyncio.to_thread(publish_event, redis_url, prefix, last)
            await asyncio.to_thread(wait_for, lambda: client.xlen(stream) == 1, 30,
                                    "the journal to trim the five entries every group has acked")
            client.xack(stream, "profiler", *take(client, stream, "profiler", 1))  # the stream goes quiet
            await asyncio.to_thread(wait_for, lambda: client.xlen(stream) == 0, 30,
                                    "the journal's sweep to trim the last entry, acked after its last event")

    asyncio.run(go())
    assert journaled() == 6, "every event is in the run's journal"
