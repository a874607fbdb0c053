"""Redis restarted empty under a live campaign: the bundle is the record (issue 30, items 3 and 4).

A test-owned Redis is killed and started again with its folder wiped (nothing on disk, as
`make demo`'s Redis) at three points of one run: after the profile, in the middle of the
bench, and right after bench.completed. Nothing is done by hand in between:

- the run completes on its own (groups come back, each service takes up the runs waiting on
  it from the bundle, services/runtime/catchup.py);
- no step runs twice: each step's event once in the journal, the trainer started once, the
  bench executed once (one attempt, so each server launched once);
- every event the new streams hold is in the bundle's events.jsonl.

`specdec resume` is tested on its own (tests/integration/test_resume.py).
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from tests.support.campaigns import ROOT, Topology, counter_lines, counter_of, journal, write_campaign, write_trainer
from tests.support.redis_server import RedisServer

TRAFFIC = ROOT / "infra/examples/sample-traffic.jsonl"
RUN_TIMEOUT_S = 240
ONCE = ("campaign.submitted", "profile.completed", "corpus.completed", "capacity.selected", "training.planned",
        "training.started", "training.completed", "bench.planned", "bench.completed", "gate.decided",
        "report.rendered", "report.published")


def restart_empty(server: RedisServer) -> None:
    """Kill Redis and start it again on the same port with nothing on disk: every stream, group and
    ledger mark is gone."""
    server.kill()
    shutil.rmtree(server.directory)
    server.start()


def journal_until(topology: Topology, run_id: str, done: Any, what: str, timeout_s: float = RUN_TIMEOUT_S) -> list[dict]:
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
    try:
        topology.start_all()
        topology.wait_started(timeout_s=RUN_TIMEOUT_S)
        trainer = write_trainer(tmp_path / "trainer")
        campaign = write_campaign(tmp_path / "campaign.yaml", target=toy_target, traffic=TRAFFIC, trainer=trainer)
        run_id = topology.submit(campaign)

        journal_until(topology, run_id, has("profile.completed"), "profile.completed")
        restart_empty(redis_server)
        journal_until(topology, run_id, has("bench.trial.completed"), "bench.trial.completed")
        streamed.update({e["event_id"]: e["schema"] for e in topology.events(run_id)})
        restart_empty(redis_server)
        journal_until(topology, run_id, has("bench.completed"), "bench.completed")
        streamed.update({e["event_id"]: e["schema"] for e in topology.events(run_id)})
        restart_empty(redis_server)

        events = journal_until(topology, run_id, has("report.published"), "report.published")
        time.sleep(3.0)  # anything that would run twice has had time to
        streamed.update({e["event_id"]: e["schema"] for e in topology.events(run_id)})
        events = journal(topology.bundle_root / run_id)

        seen = Counter(e["schema"] for e in events)
        assert {s: seen[s] for s in ONCE if seen[s] != 1} == {}, f"each step's event once: {dict(seen)}"
        trials = [(e["cell_id"], e["trial"], e["concurrency"]) for e in events if e["schema"] == "bench.trial.completed"]
        assert len(trials) == len(set(trials)), f"a trial was measured twice: {sorted(trials)}"
        assert counter_lines(counter_of(trainer)) == ["start", "done"], "the trainer started once"
        run_dir = topology.bundle_root / run_id
        assert len(list((run_dir / "bench/attempts").iterdir())) == 1, "the bench executed once"
        assert not [p for p in run_dir.rglob("attempt-*") if p.is_dir()], "no server launched a second time"
        ids = [e["event_id"] for e in events]
        assert len(ids) == len(set(ids)), "the journal appended an event twice"
        missing = {i: s for i, s in streamed.items() if i not in set(ids)}
        assert missing == {}, f"events the restarted streams held are not in events.jsonl: {missing}"
    finally:
        topology.stop()
