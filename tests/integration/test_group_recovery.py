"""A service instance whose Redis loses its state while it runs (docs/delivery.md, "Groups come back").

Redis may restart empty or be flushed (docs/design.md, "Redis is the transport; the bundle is the
record"): the instance's consumer group is gone, and the next publish recreates the stream
without it. The instance must recreate its group, at ID 0 so the entry already waiting in the
new stream is read, and go on consuming, saying so in one warning instead of a traceback per
read. Each test runs a redis-server of its own (conftest's `redis_server`): it flushes or
wipes that one, never the shared Redis.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from contracts.envelope import Event
from contracts.events import ProfileRequested
from tests.integration.test_delivery import lines, publish, request, stream_events
from tests.support.redis_server import RedisServer
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "groups"
STREAM = f"{PREFIX}.profile.requested"
GROUP = "worker"  # tests/support/worker.py's service name
WARNING = "consumer group vanished"


@pytest.fixture
def worker(redis_server: RedisServer, tmp_path: Path) -> Iterator[Path]:
    """A worker process (tests/support/worker.py) on the test's own Redis; yields its log file."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SPECDEC_REDIS_URL": redis_server.url,
        "SPECDEC_STREAM_PREFIX": PREFIX,
        "SPECDEC_BUNDLE_ROOT": str(tmp_path / "bundles"),
        "SPECDEC_INSTANCE": "w1",
        "SPECDEC_RECLAIM_IDLE_MS": "1500",
        "SPECDEC_RECLAIM_POLL_MS": "100",
        "SPECDEC_READ_BLOCK_MS": "100",
        "WORKER_LOG": str(tmp_path / "side-effects.log"),
        "WORKER_SLEEP_S": "0",
    }
    log = tmp_path / "worker.log"
    # To a file: a pipe nobody reads would block the worker once full.
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.worker"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=out,
        )
    yield log
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _done(side_effects: Path) -> list[str]:
    return [line[1] for line in lines(side_effects) if line[0] == "done"]


def _flush_and_publish(redis_server: RedisServer, client: redis.Redis, event: Event) -> redis.Redis:
    # In one transaction: the stream is back, without its group, before the worker reads
    # again, so the group must be recreated at ID 0 for this entry to be read at all.
    # FLUSHALL is the operator's (the services' Redis user may not run it).
    operator = redis.Redis.from_url(redis_server.operator_url)
    pipe = operator.pipeline(transaction=True)
    pipe.flushall()
    publish(pipe, PREFIX, event)  # a pipeline queues the same XADD
    pipe.execute()
    operator.close()
    return client


def _restart_empty_and_publish(redis_server: RedisServer, client: redis.Redis, event: Event) -> redis.Redis:
    client.close()
    redis_server.kill()
    shutil.rmtree(redis_server.directory)  # its AOF: it comes back with nothing
    redis_server.start()
    client = redis.Redis.from_url(redis_server.url)
    # Published before the worker reconnects: the stream exists again, without its group.
    publish(client, PREFIX, event)
    return client


@pytest.mark.parametrize("lose", [_flush_and_publish, _restart_empty_and_publish], ids=["flushall", "restart-empty"])
def test_a_vanished_group_is_recreated_and_consumption_goes_on(redis_server, worker, tmp_path, lose):
    side_effects = tmp_path / "side-effects.log"
    client = redis.Redis.from_url(redis_server.url)
    wait_for(lambda: client.exists(STREAM) and client.xinfo_groups(STREAM), 20, "the worker's consumer group")
    before = request()
    publish(client, PREFIX, before)
    wait_for(lambda: _done(side_effects) == [before.event_id], 20, "the event before the loss")

    after = ProfileRequested(run_id="toy-20261130-000000-fedcba", producer="test", requested_by="test")
    client = lose(redis_server, client, after)
    # Bounded: a restart adds faststream's 5 s pause after a dropped connection.
    wait_for(lambda: _done(side_effects) == [before.event_id, after.event_id], 15, "the event after the loss")

    groups = client.xinfo_groups(STREAM)
    assert [g["name"] for g in groups] == [GROUP.encode()], groups
    wait_for(lambda: client.xpending(STREAM, GROUP)["pending"] == 0, 5, "the ack in the recreated group")
    assert [e["causation_id"] for e in stream_events(client, f"{PREFIX}.profile.completed")] == [after.event_id]
    client.close()

    time.sleep(1.5)  # a flood (a failing read repeated every poll) would show by now
    text = worker.read_text()
    warnings = [line for line in text.splitlines() if WARNING in line]
    assert len(warnings) == 1, f"expected one warning, got {len(warnings)}:\n{text[-3000:]}"
    assert STREAM in warnings[0] and f'"group": "{GROUP}"' in warnings[0] and '"level": "warning"' in warnings[0]
    # The loss reaches the log once, as that warning: no traceback of it, and faststream
    # never stopped a subscriber over it.
    about_the_group = [line for line in text.splitlines() if "NOGROUP" in line or "UNBLOCKED" in line]
    assert about_the_group == warnings, text[-3000:]
    assert "Stopping subscriber" not in text and "raised an exception, retrying" not in text, text[-3000:]
    if lose is _flush_and_publish:
        assert "Traceback" not in text, text[-3000:]
