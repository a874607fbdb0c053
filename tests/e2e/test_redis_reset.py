"""Redis restarted empty under a live campaign: the bundle is the record (issue 30, items 3 and 4).

A test-owned Redis is killed and started again with its folder wiped (nothing on disk, as
`make demo`'s Redis) at three points of one run: after the profile, in the middle of the
bench, and right after bench.completed. Nothing is done by hand in between:

- the run completes on its own (groups come back, each service takes up the runs waiting on
  it from the bundle, services/runtime/delivery/catchup.py);
- no step runs twice: each step's event once in the journal, the trainer started once, the
  bench executed once (one attempt, so each server launched once);
- every event the new streams hold is in the bundle's events.jsonl;
- the manifest's `lost_events` names the loss the restarts caused: the events the killed Redis
  held (its AOF, appendfsync always, read back by a second server on a copy of its folder) that
  events.jsonl never received. Each is named, unless the bundle cannot know it (no step record
  holds it and nothing names it: docs/delivery.md, "The journal after a reset"), and nothing
  else is named.

`specdec resume` is tested on its own (tests/integration/test_resume.py).
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import redis

from tests.support.campaigns import (
    ROOT,
    Topology,
    counter_lines,
    counter_of,
    journal,
    run_events,
    write_campaign,
    write_trainer,
)
from tests.support.redis_server import RedisServer

TRAFFIC = ROOT / "infra/examples/sample-traffic.jsonl"
RUN_TIMEOUT_S = 240
ONCE = ("campaign.submitted", "profile.completed", "corpus.completed", "capacity.selected", "training.planned",
        "training.started", "training.completed", "bench.planned", "bench.completed", "gate.decided",
        "report.rendered", "report.published")


def restart_empty(server: RedisServer, prefix: str, run_id: str, held: dict[str, str]) -> None:
    """Kill Redis and start it again on the same port with nothing on disk: every stream, group and
    ledger mark is gone. What it held of the run (event_id -> schema) is added to `held`."""
    server.kill()
    copy = server.directory.with_name(f"{server.directory.name}-held-{len(list(server.directory.parent.iterdir()))}")
    shutil.copytree(server.directory, copy)
    shutil.rmtree(server.directory)
    server.start()
    reader = RedisServer(copy)  # the killed server's AOF, loaded on a port of its own
    reader.start()
    client = redis.Redis.from_url(reader.url)
    try:
        held.update({e["event_id"]: e["schema"] for e in run_events(client, prefix, run_id)})
    finally:
        client.close()
        reader.stop()


def knowable(run_dir: Path, event_id: str) -> bool:
    """Whether the bundle can know an event it never journaled: a step record holds it, or a known
    event (journaled, or in a step record) or a step record names it."""
    records = [orjson.loads(p.read_bytes()) for p in (run_dir / "steps").rglob("*.json")]
    known = journal(run_dir) + [out for record in records for out in record["outputs"]]
    return (any(e.get("event_id") == event_id or e.get("causation_id") == event_id for e in known)
            or any(record["trigger_event_id"] == event_id for record in records))


def journal_until(
    topology: Topology, run_id: str, done: Any, what: str, *, timeout_s: float = RUN_TIMEOUT_S
) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events = journal(topology.bundle_root / run_id) if (topology.bundle_root / run_id).is_dir() else []
        if done(events):
            return events
        failed = [e for e in events if e["schema"].endswith(".failed")]
        assert not failed, f"the run failed: {failed}\n{topology.log_tail()}"
        time.sleep(0.2)
    raise AssertionError(f"run {run_id}: no {what} in the journal within {timeout_s} s\n{topology.log_tail()}")


def has(schema: str) -> Any:
    return lambda events: any(e["schema"] == schema for e in events)


def test_redis_restarted_empty_three_times_the_run_completes_once(redis_server: RedisServer, toy_target: Path,
                                                                  tmp_path: Path) -> None:
    topology = Topology(redis_url=redis_server.url, prefix=f"rst{uuid.uuid4().hex[:8]}", root=tmp_path / "topology")
    streamed: dict[str, str] = {}  # event_id -> schema of every event the streams held after a restart
    held: dict[str, str] = {}  # event_id -> schema of every event a killed Redis held
    try:
        topology.start_all()
        topology.wait_started(timeout_s=RUN_TIMEOUT_S)
        trainer = write_trainer(tmp_path / "trainer")
        campaign = write_campaign(tmp_path / "campaign.yaml", target=toy_target, traffic=TRAFFIC, trainer=trainer)
        run_id = topology.submit(campaign)

        journal_until(topology, run_id, has("profile.completed"), "profile.completed")
        restart_empty(redis_server, topology.prefix, run_id, held)
        journal_until(topology, run_id, has("bench.trial.completed"), "bench.trial.completed")
        streamed.update({e["event_id"]: e["schema"] for e in topology.events(run_id)})
        restart_empty(redis_server, topology.prefix, run_id, held)
        journal_until(topology, run_id, has("bench.completed"), "bench.completed")
        streamed.update({e["event_id"]: e["schema"] for e in topology.events(run_id)})
        restart_empty(redis_server, topology.prefix, run_id, held)

        events = journal_until(topology, run_id, has("report.published"), "report.published")
        time.sleep(3.0)  # anything that would run twice has had time to
        streamed.update({e["event_id"]: e["schema"] for e in topology.events(run_id)})
        events = journal(topology.bundle_root / run_id)

        seen = Counter(e["schema"] for e in events)
        assert {s: seen[s] for s in ONCE if seen[s] != 1} == {}, f"each step's event once: {dict(seen)}"
        trials = [
            (e["cell_id"], e["trial"], e["concurrency"]) for e in events if e["schema"] == "bench.trial.completed"
        ]
        assert len(trials) == len(set(trials)), f"a trial was measured twice: {sorted(trials)}"
        assert counter_lines(counter_of(trainer)) == ["start", "done"], "the trainer started once"
        run_dir = topology.bundle_root / run_id
        assert len(list((run_dir / "bench/attempts").iterdir())) == 1, "the bench executed once"
        assert not [p for p in run_dir.rglob("attempt-*") if p.is_dir()], "no server launched a second time"
        ids = [e["event_id"] for e in events]
        assert len(ids) == len(set(ids)), "the journal appended an event twice"
        missing = {i: s for i, s in streamed.items() if i not in set(ids)}
        assert missing == {}, f"events the restarted streams held are not in events.jsonl: {missing}"

        # The loss the restarts caused, and what the manifest names (once the journal's last pass is done).
        lost = {i: s for i, s in held.items() if i not in set(ids)}
        expected = {i: s for i, s in lost.items() if knowable(run_dir, i)}

        def named() -> dict[str, str | None]:
            spans = orjson.loads((run_dir / "manifest.json").read_bytes())["lost_events"]
            return {e["event_id"]: e["schema"] for span in spans for e in span["events"]}

        # The journal's pass after the last reset ran a settle period (1.5 s) after it, long before report.published.
        assert set(named()) == set(expected), f"the manifest names {named()}; the restarts lost {lost}"
    finally:
        topology.stop()
