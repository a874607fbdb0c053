"""A service instance across a Redis SIGKILL and restart (AOF, appendfsync always).

A step that is running when Redis dies keeps running; its heartbeat cannot
reach Redis, so its lease lapses and its message looks idle once Redis is back.
The step must still run once: the heartbeat retries until Redis answers and
takes its lease back, and the instance's own reclaimer leaves alone a step that
runs in the same instance. The instance's subscribers reconnect and take new work.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from contracts.events import ProfileRequested
from tests.integration.test_delivery import lines, publish, request, stream_events, wait_for
from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "recovery"


@pytest.fixture
def worker_env(redis_server: RedisServer, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "PYTHONPATH": str(ROOT),
        "SPECDEC_REDIS_URL": redis_server.url,
        "SPECDEC_STREAM_PREFIX": PREFIX,
        "SPECDEC_BUNDLE_ROOT": str(tmp_path / "bundles"),
        "SPECDEC_INSTANCE": "w1",
        # Reclaim after 1.5 s idle (lease 1 s, heartbeat 0.5 s), polled every 0.1 s.
        "SPECDEC_RECLAIM_IDLE_MS": "1500",
        "SPECDEC_RECLAIM_POLL_MS": "100",
        "SPECDEC_READ_BLOCK_MS": "100",
        "SPECDEC_MAX_DELIVERIES": "3",
        "WORKER_LOG": str(tmp_path / "side-effects.log"),
    })
    return env


@pytest.fixture
def worker(worker_env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    # Its log goes to a file: a pipe nobody reads would block the worker once the
    # reconnect errors of the outage filled it.
    with (tmp_path / "worker.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.worker"], env={**worker_env, "WORKER_SLEEP_S": "6"}, cwd=ROOT,
            stdout=subprocess.DEVNULL, stderr=log,
        )
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _connect(redis_server: RedisServer) -> redis.Redis:
    return redis.Redis.from_url(redis_server.url)


def test_step_running_across_a_redis_restart_runs_once(redis_server, worker, worker_env, tmp_path):
    log = Path(worker_env["WORKER_LOG"])
    client = _connect(redis_server)
    stream = f"{PREFIX}.profile.requested"
    wait_for(lambda: client.exists(stream) and client.xinfo_groups(stream), 30, "the worker's consumer group")
    event = request()
    publish(client, PREFIX, event)
    wait_for(lambda: any(row[0] == "start" for row in lines(log)), 20, "the step to start")
    client.close()

    redis_server.kill()
    # Down for longer than the lease (1 s) and the reclaim idle time (1.5 s):
    # without the heartbeat's retry, the lease lapses and the message is reclaimed.
    time.sleep(2.5)
    redis_server.start()

    client = _connect(redis_server)
    wait_for(lambda: any(row[0] == "done" for row in lines(log)), 30, "the step to complete")
    wait_for(lambda: client.xpending(stream, "worker")["pending"] == 0, 15, "the ack")
    time.sleep(2.0)  # a second run, if one had started, would show by now
    words = [row[0] for row in lines(log)]
    assert words.count("start") == 1, f"the step ran again beside the running one: {lines(log)}"
    assert words.count("done") == 1
    outputs = stream_events(client, f"{PREFIX}.profile.completed")
    assert [o["causation_id"] for o in outputs] == [event.event_id]
    assert client.xlen(f"{PREFIX}.deadletter") == 0

    # The subscribers reconnected: new work is taken and done.
    publish(client, PREFIX, ProfileRequested(run_id="toy-20261130-000000-fedcba", producer="test", requested_by="test"))
    wait_for(lambda: client.xlen(f"{PREFIX}.profile.completed") == 2, 30, "new work after the restart")
    client.close()
    assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-2000:]


@pytest.mark.parametrize("ledger_kind", ["redis", "memory"])
async def test_renew_keeps_or_takes_back_a_free_lease_and_never_one_that_is_taken_or_done(
    redis_url, prefix, ledger_kind
):
    import redis.asyncio as aioredis

    from services.runtime.delivery.ledger import MemoryLedger, RedisLedger, StepKey

    client = aioredis.Redis.from_url(redis_url)
    ledger = RedisLedger(client, prefix) if ledger_kind == "redis" else MemoryLedger()
    key = StepKey("trainer-proxy", "toy-20261130-000000-abcdef", "capacity.selected", "e1")
    try:
        assert await ledger.begin(key, "a", 50) == "begun"
        assert await ledger.renew(key, "a", 50)
        await asyncio.sleep(0.12)  # the lease lapses while its owner still runs (a Redis outage)
        assert await ledger.renew(key, "a", 5_000), "a lapsed, free lease is taken back by its owner"
        assert not await ledger.renew(key, "b", 5_000), "another owner never renews a held lease"
        await ledger.finish(key, "a", ["training.completed"])
        assert not await ledger.renew(key, "a", 5_000), "a done step's lease is never taken back"
    finally:
        await client.aclose()


@pytest.mark.parametrize("ledger_kind", ["redis", "memory"])
async def test_finish_then_begin_finishes_first_and_can_be_repeated(redis_url, prefix, ledger_kind):
    """A read batch's finish of one entry travels with the next entry's lease: the finish
    lands first (so a duplicate right behind its original finds it done), the entry is
    acked, and a retry of the whole call after a dropped connection still answers 'begun'."""
    import redis.asyncio as aioredis

    from services.runtime.delivery.ledger import AckRef, Finish, MemoryLedger, RedisLedger, StepKey

    client = aioredis.Redis.from_url(redis_url)
    ledger = RedisLedger(client, prefix) if ledger_kind == "redis" else MemoryLedger()
    stream = f"{prefix}.profile.requested"
    first = StepKey("profiler", "toy-20261130-000000-abcdef", "profile.requested", "e1")
    second = StepKey("profiler", "toy-20261130-000000-abcdef", "profile.requested", "e2")
    try:
        ack = None
        if ledger_kind == "redis":
            await client.xgroup_create(stream, "profiler", id="0", mkstream=True)
            entry = await client.xadd(stream, {"k": "v"})
            await client.xreadgroup("profiler", "c", {stream: ">"})
            ack = AckRef(stream, "profiler", entry.decode())
        assert await ledger.begin(first, "a/1", 5_000) == "begun"
        done = Finish(first, "a/1", ["profile.completed"], ack)
        # A duplicate of the finished entry, right behind it in the batch: done, not busy.
        assert await ledger.finish_then_begin(done, first, "a/2", 5_000) == "done"
        assert await ledger.finish_then_begin(done, second, "a/3", 5_000) == "begun"
        assert await ledger.finish_then_begin(done, second, "a/3", 5_000) == "begun", "a repeated call keeps its lease"
        assert await ledger.finish_then_begin(done, second, "b/3", 5_000) == "busy", "another owner never takes it"
        assert not await ledger.renew(first, "a/1", 5_000), "the finished step's lease is gone"
        if ledger_kind == "redis":
            assert (await client.xpending(stream, "profiler"))["pending"] == 0, "the finished entry is acked"
    finally:
        await client.aclose()
