"""Delivery semantics against a real Redis and real service processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import orjson
import pytest
import redis

from contracts.envelope import Event
from contracts.events import ProfileRequested
from services.runtime.delivery.broker import decode_entry
from tests.support.waiting import wait_for

RUN = "toy-20261130-000000-abcdef"


def lines(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line]


class Workers:
    """Starts worker processes (tests/support/worker.py) with the test's settings."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.log = log
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, instance: str, **extra: str) -> subprocess.Popen[bytes]:
        env = {**self.env, "WORKER_LOG": str(self.log), "SPECDEC_INSTANCE": instance, **extra}
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.worker"], env=env, cwd=self.env["PYTHONPATH"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


@pytest.fixture
def workers(settings_env: dict[str, str], tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(settings_env, tmp_path / "side-effects.log")
    yield pool
    pool.stop_all()


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def publish(client: redis.Redis, prefix: str, event) -> None:
    """Publish the way the Bus does (faststream binary envelope), synchronously."""
    import asyncio

    from faststream.redis.parser.binary import BinaryMessageFormatV1

    from services.runtime.delivery.broker import event_headers

    data = asyncio.run(
        BinaryMessageFormatV1.encode(message=event.to_json(), reply_to=None, headers=event_headers(event),
                                     correlation_id=event.event_id)
    )
    client.xadd(f"{prefix}.{event.SCHEMA}", {"__data__": data})


def stream_events(client: redis.Redis, stream: str) -> list[dict]:
    # redis-py types replies for decode_responses too; this client's are bytes
    entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", client.xrange(stream))
    return [orjson.loads(decode_entry(fields)[0]) for _, fields in entries]


def request() -> Event:
    return ProfileRequested(run_id=RUN, producer="test", requested_by="test")


def wait_group_ready(client: redis.Redis, prefix: str) -> None:
    stream = f"{prefix}.profile.requested"
    wait_for(lambda: client.exists(stream) and client.xinfo_groups(stream), 20, "the worker's consumer group")


def test_sigkill_mid_handler_is_reclaimed_and_completes_once(workers, client, prefix):
    first = workers.start("a", WORKER_SLEEP_S="30")
    wait_group_ready(client, prefix)
    event = request()
    publish(client, prefix, event)
    wait_for(lambda: any(row[0] == "start" for row in lines(workers.log)), 20, "the first start")
    first.send_signal(signal.SIGKILL)
    first.wait()

    pending = client.xpending(f"{prefix}.profile.requested", "worker")
    assert pending["pending"] == 1, "a killed handler must leave its message pending"

    workers.start("b", WORKER_SLEEP_S="0")
    wait_for(lambda: any(row[0] == "done" for row in lines(workers.log)), 30, "the reclaimed completion")
    wait_for(lambda: client.xpending(f"{prefix}.profile.requested", "worker")["pending"] == 0, 10, "the ack")

    log = lines(workers.log)
    assert [row[0] for row in log].count("start") == 2
    assert [row[0] for row in log].count("done") == 1, "the side effect completed exactly once"
    outputs = stream_events(client, f"{prefix}.profile.completed")
    assert len(outputs) == 1 and outputs[0]["causation_id"] == event.event_id


def test_long_handler_with_heartbeat_is_not_reclaimed(workers, client, prefix):
    # reclaim after 1.5 s idle; the handler runs 5 s while a second instance polls.
    workers.start("a", WORKER_SLEEP_S="5")
    workers.start("b", WORKER_SLEEP_S="0")
    wait_group_ready(client, prefix)
    publish(client, prefix, request())
    wait_for(lambda: any(row[0] == "done" for row in lines(workers.log)), 30, "the completion")
    time.sleep(1.0)
    log = lines(workers.log)
    assert [row[0] for row in log].count("start") == 1, f"the live step was stolen: {log}"
    assert [row[0] for row in log].count("done") == 1
    assert len(stream_events(client, f"{prefix}.profile.completed")) == 1


def test_entries_waiting_in_a_read_batch_are_kept_from_the_reclaimer(workers, client, prefix):
    # Eight events are waiting when instance a starts: it reads them in one batch
    # and runs them one after another (0.45 s each). The last ones start up to
    # 3.2 s after the read, well past the 1.5 s reclaim idle time, while instance
    # b polls every 0.1 s: only the batch's keeper (touching waiting entries)
    # keeps b from taking them.
    stream = f"{prefix}.profile.requested"
    events = [ProfileRequested(run_id=f"toy-20261130-00000{i}-abcdef", producer="test", requested_by="test")
              for i in range(8)]
    for event in events:
        publish(client, prefix, event)
    a = workers.start("a", WORKER_SLEEP_S="0.45")
    wait_for(lambda: any(row[0] == "start" for row in lines(workers.log)), 20, "a's first start")
    workers.start("b", WORKER_SLEEP_S="0")
    wait_for(lambda: [row[0] for row in lines(workers.log)].count("done") == 8, 30, "the eight completions")
    wait_for(lambda: client.xpending(stream, "worker")["pending"] == 0, 10, "the acks")
    time.sleep(0.5)
    log = lines(workers.log)
    assert [row[1] for row in log if row[0] == "start"] == [e.event_id for e in events], (
        f"each ran once, in order: {log}")
    assert {row[2] for row in log} == {str(a.pid)}, f"a waiting entry was reclaimed: {log}"


def test_duplicate_delivery_does_not_repeat_the_side_effect(workers, client, prefix):
    workers.start("a")
    wait_group_ready(client, prefix)
    event = request()
    publish(client, prefix, event)
    wait_for(lambda: any(row[0] == "done" for row in lines(workers.log)), 20, "the first completion")
    # The same event again, and a second event of the same run and schema (same step key).
    publish(client, prefix, event)
    publish(client, prefix, request())
    wait_for(lambda: client.xinfo_groups(f"{prefix}.profile.requested")[0]["entries-read"] == 3, 20, "all three read")
    wait_for(lambda: client.xpending(f"{prefix}.profile.requested", "worker")["pending"] == 0, 10, "all acked")
    assert [row[0] for row in lines(workers.log)].count("done") == 1
    assert [row[0] for row in lines(workers.log)].count("start") == 1
    assert len(stream_events(client, f"{prefix}.profile.completed")) == 1


def test_a_duplicate_of_a_running_step_waits_and_is_never_dead_lettered(workers, client, prefix):
    # max_deliveries=3, reclaim after 1.5 s idle (conftest): over the 6 s the original runs, the
    # duplicate (a second request of the same run: the same step key) is delivered again and again.
    workers.start("a", WORKER_SLEEP_S="6")
    workers.start("b", WORKER_SLEEP_S="6")
    wait_group_ready(client, prefix)
    stream = f"{prefix}.profile.requested"
    publish(client, prefix, request())
    wait_for(lambda: any(row[0] == "start" for row in lines(workers.log)), 20, "the original's start")
    publish(client, prefix, request())
    counts: list[int] = []  # the duplicate's delivery count, sampled while the original runs

    def original_done() -> bool:
        counts.extend(p["times_delivered"] for p in client.xpending_range(stream, "worker", "-", "+", 10))
        return any(row[0] == "done" for row in lines(workers.log))

    wait_for(original_done, 30, "the original's completion")
    wait_for(lambda: client.xpending(stream, "worker")["pending"] == 0, 10, "the duplicate acked")
    # Each delivery that found the step running was given back: waiting is not counted.
    assert counts and max(counts) <= 2, counts
    assert client.xlen(f"{prefix}.deadletter") == 0, stream_events(client, f"{prefix}.deadletter")
    log = [row[0] for row in lines(workers.log)]
    assert (log.count("start"), log.count("done")) == (1, 1), log
    assert len(stream_events(client, f"{prefix}.profile.completed")) == 1


def test_poison_payload_and_unknown_version_are_dead_lettered(workers, client, prefix):
    workers.start("a")
    wait_group_ready(client, prefix)
    stream = f"{prefix}.profile.requested"
    client.xadd(stream, {"garbage": "not an event"})
    future = orjson.loads(request().to_json())
    future["version"] = 9
    client.xadd(stream, {"__data__": orjson.dumps(future)})
    invalid = orjson.loads(request().to_json())
    invalid["requested_by"] = 42
    client.xadd(stream, {"__data__": orjson.dumps(invalid)})

    dlq = f"{prefix}.deadletter"
    wait_for(lambda: client.xlen(dlq) == 3, 20, "three dead letters")
    records = stream_events(client, dlq)
    kinds = sorted(r["kind"] for r in records)
    assert kinds == ["invalid", "invalid", "unknown"]
    unknown = next(r for r in records if r["kind"] == "unknown")
    assert "v9" in unknown["reason"] and orjson.loads(unknown["payload"])["version"] == 9
    assert any("requested_by" in r["reason"] for r in records)
    assert all(r["service"] == "worker" and r["stream"] == stream for r in records)
    assert client.xpending(stream, "worker")["pending"] == 0
    assert lines(workers.log) == [], "an invalid payload never reaches the handler"


def test_failing_handler_is_dead_lettered_after_max_deliveries(workers, client, prefix):
    # max_deliveries=3 (conftest); reclaim after 1.5 s idle.
    workers.start("a", WORKER_FAIL="always")
    wait_group_ready(client, prefix)
    event = request()
    publish(client, prefix, event)
    dlq = f"{prefix}.deadletter"
    wait_for(lambda: client.xlen(dlq) == 1, 30, "the dead letter")
    record = stream_events(client, dlq)[0]
    assert record["kind"] == "failed"
    assert record["delivery_count"] == 3
    assert "worker told to fail" in record["error"]
    assert orjson.loads(record["payload"])["event_id"] == event.event_id
    assert [row[0] for row in lines(workers.log)].count("start") == 3
    assert client.xlen(f"{prefix}.profile.completed") == 0


def test_sigterm_leaves_unfinished_work_pending(workers, client, prefix, settings_env):
    first = workers.start("a", WORKER_SLEEP_S="30", SPECDEC_SHUTDOWN_GRACE_S="0.5")
    wait_group_ready(client, prefix)
    publish(client, prefix, request())
    wait_for(lambda: any(row[0] == "start" for row in lines(workers.log)), 20, "the start")
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=15) == 0, first.stderr.read().decode()[-2000:] if first.stderr else ""
    assert client.xpending(f"{prefix}.profile.requested", "worker")["pending"] == 1
    workers.start("b")
    wait_for(lambda: any(row[0] == "done" for row in lines(workers.log)), 30, "another instance finishing it")
    assert [row[0] for row in lines(workers.log)].count("done") == 1


def test_acknowledged_publishes_survive_a_redis_sigkill(redis_server):
    """Every event whose publish returned is there after SIGKILL and restart (AOF, appendfsync always)."""
    import asyncio

    from services.runtime.delivery.broker import Bus, make_broker
    from services.runtime.settings import RuntimeSettings

    settings = RuntimeSettings(redis_url=redis_server.url, stream_prefix="durable")
    published: list[str] = []

    async def go() -> None:
        broker = make_broker(settings)
        await broker.connect()
        bus = Bus(broker, settings.stream_prefix)
        for _ in range(200):
            event = request()
            await bus.publish(event)
            published.append(event.event_id)
        await broker.stop()

    asyncio.run(go())
    redis_server.kill()
    redis_server.start()
    client = redis.Redis.from_url(redis_server.url)
    found = [e["event_id"] for e in stream_events(client, "durable.profile.requested")]
    client.close()
    assert found == published
