"""Whole campaigns under crashes and bad inputs.

- A service instance SIGKILLed in the middle of its step and started again
  (same consumer name, as a container restarted in place): the run completes,
  no step is done twice (counted on the streams and by the trainer itself).
- Redis (a test-owned instance with compose's infra/redis.conf: AOF on,
  appendfsync everysec) SIGKILLed mid-run and restarted on the same port and
  folder: the run completes, no event is lost, no step runs twice, and the
  bundle's journal holds every event of the run once.
- Campaigns with bad inputs each end with the right `<step>.failed` and its
  reason; nothing after it runs; the bundle keeps what was produced;
  `specdec status RUN_ID --json` shows where and why.

Each test runs its own service processes (tests/support/campaigns.py) on a
stream prefix of its own, with delivery settings that reclaim a crashed
instance's work within seconds. Every bench cell is served by the stand-in
server (tests/support/fake_vllm.py) through the cell's operator serve command
and the trainer is a tiny script, so a whole campaign takes seconds; the
real-vLLM path is covered by the shared campaign (tests/e2e/conftest.py).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.campaigns import (
    ROOT,
    Topology,
    counter_lines,
    counter_of,
    counts,
    dead_letters,
    drop_keys,
    journal,
    leftovers,
    manifest_paths,
    running_topology,
    write_campaign,
    write_trainer,
)
from tests.support.redis_server import RedisServer
from tests.support.waiting import wait_for

TRAFFIC = ROOT / "infra/examples/sample-traffic.jsonl"
RUN_TIMEOUT_S = 180
CELLS = 3  # standing, ngram-k3, draft-k3
TRIALS = 3
# Each step's completion (or progress) event: exactly once in a run that completes.
ONCE = ("campaign.submitted", "profile.completed", "corpus.completed", "capacity.selected", "training.planned",
        "training.started",
        "training.completed", "bench.planned", "bench.completed", "gate.decided", "report.rendered", "report.published")
AFTER_TRAINING = ("bench.", "gate.", "report.", "publish.")


def assert_completed_once(events: list[dict[str, Any]]) -> None:
    """The run completed, each step's event once, no trial measured twice (every problem named at once).

    Events are counted by event ID: an event published again, same ID (a retried bench emits its
    adopted trials' events again), is the same event; the journal and every consumer keep it once."""
    events = list({e["event_id"]: e for e in events}.values())
    seen = counts(events)
    problems = []
    twice = {schema: n for schema, n in seen.items() if schema in ONCE and n != 1}
    if twice:
        problems.append(f"a step's event appears more than once: {twice}")
    missing = [schema for schema in ONCE if schema not in seen]
    if missing:
        problems.append(f"the run did not complete: missing {missing}")
    problems += [f"{e['schema']}: {e['reason'][:600]}" for e in events if e["schema"].endswith(".failed")]
    problems += [f"capacity.unavailable: {e['reasons']}" for e in events if e["schema"] == "capacity.unavailable"]
    if seen.get("bench.trial.completed") != CELLS * TRIALS:
        problems.append(f"{seen.get('bench.trial.completed')} bench.trial.completed, not {CELLS * TRIALS}")
    trials = [(e["cell_id"], e["trial"], e["concurrency"]) for e in events if e["schema"] == "bench.trial.completed"]
    if len(set(trials)) != len(trials):
        problems.append(f"a trial was measured twice: {sorted(trials)}")
    plans = {e["plan"]["sha256"] for e in events if e["schema"] == "training.planned"}
    if len(plans) != 1:
        problems.append(f"training was planned differently on redelivery: {plans}")
    assert not problems, "; ".join(problems)


def assert_journal_complete(topology: Topology, run_id: str, events: list[dict[str, Any]]) -> None:
    """The bundle's events.jsonl holds every event of the run, each once."""
    def complete() -> bool:
        return {e["event_id"] for e in journal(topology.bundle_root / run_id)} >= {e["event_id"] for e in events}

    wait_for(complete, 20, "the journal to catch up")
    ids = [e["event_id"] for e in journal(topology.bundle_root / run_id)]
    assert len(ids) == len(set(ids)), "the journal appended an event twice"
    assert set(ids) == {e["event_id"] for e in events}


@pytest.fixture
def topology(redis_url: str, tmp_path: Path) -> Iterator[Topology]:
    yield from running_topology(redis_url, tmp_path, "rel")


# --- a service SIGKILLed mid-step -------------------------------------------------


def test_trainer_proxy_killed_mid_step_then_bench_runner_killed_mid_bench_completes_the_run_once(
    topology: Topology, toy_target: Path, tmp_path: Path
) -> None:
    """Two kills in one campaign (each costs a campaign's minute of `make test` on its own):
    - SIGKILL the trainer-proxy after its trainer ran and was captured, while the step
      (probes, training.completed) is still in progress: the restarted instance reclaims the
      pending message, takes the capture as it is (the trainer does not run again);
    - SIGKILL the bench-runner after its first measured trial: its server dies with it, and
      the restarted instance finishes the bench without measuring a trial twice.
    The run goes on to its report, each step's event once. (A trainer-proxy killed while its
    trainer still runs, which re-attaches, is crashed by tests/e2e/test_failpoints.py.)"""
    topology.start_all()
    trainer = write_trainer(tmp_path / "trainer")
    run_id = topology.submit(
        write_campaign(tmp_path / "campaign.yaml", target=toy_target, traffic=TRAFFIC, trainer=trainer)
    )
    capture = topology.bundle_root / run_id / "training/capture.json"
    topology.wait(run_id, {"training.started"}, timeout_s=RUN_TIMEOUT_S)
    wait_for(capture.exists, 60, "the trainer's capture")
    topology.kill("trainer-proxy")

    before = counts(topology.events(run_id))
    assert "training.completed" not in before, "the kill came after the step ended; it must land mid-step"
    client = topology.client()
    pending = client.xpending(f"{topology.prefix}.capacity.selected", "trainer-proxy")["pending"]
    client.close()
    assert pending == 1, "the killed step's message must stay pending"
    topology.start("trainer-proxy")

    topology.wait(run_id, {"bench.trial.completed"}, timeout_s=RUN_TIMEOUT_S)
    topology.kill("bench-runner")
    assert "bench.completed" not in counts(topology.events(run_id)), "the kill must land mid-bench"
    wait_for(lambda: leftovers(run_id) == [], 10, "the served cell to die with its service")
    topology.start("bench-runner")

    topology.wait(run_id, {"report.published"}, timeout_s=RUN_TIMEOUT_S)
    events = topology.settle(run_id)
    assert_completed_once(events)
    assert counter_lines(counter_of(trainer)) == ["start", "done"], "the trainer ran to completion exactly once"
    restarted = (topology.logs / "trainer-proxy.2.log").read_text()
    assert '"outputs": ["training.completed"]' in restarted, "the restarted instance finished the step"
    # The restarted bench-runner resumed: a second attempt, whose raw files sit beside the dead one's.
    bench = topology.bundle_root / run_id / "bench"
    assert sorted(p.name for p in (bench / "attempts").iterdir()) == ["attempt-1.json", "attempt-2.json"]
    assert list(bench.glob("*/launch-*/attempt-2/argv.json")), "the second attempt started no server"
    assert dead_letters(topology, run_id) == []
    assert leftovers(run_id) == [], "a process labelled with the run outlived it"
    assert_journal_complete(topology, run_id, events)
    code, status = topology.status(run_id)
    assert code == 0 and not status["halted"]
    assert {s["step"]: s["state"] for s in status["steps"]}["publish"] == "done"


def test_trainer_proxy_and_its_trainer_killed_halts_as_interrupted(
    topology: Topology, toy_target: Path, tmp_path: Path
) -> None:
    """The trainer-proxy and every process of its trainer SIGKILLed (a node's crash, an operator's
    kill): no outcome was recorded and nothing is left to re-attach to, so the trainer is not
    started a second time over its partial output (docs/trainer-proxy.md, "Redelivery"): the
    restarted instance records training.failed TrainingInterrupted, and the run halts there."""
    topology.start_all()
    trainer = write_trainer(tmp_path / "trainer")
    campaign = write_campaign(tmp_path / "campaign.yaml", target=toy_target, traffic=TRAFFIC, trainer=trainer,
                              trainer_sleep_s=60)
    run_id = topology.submit(campaign)
    topology.wait(run_id, {"training.started"}, timeout_s=RUN_TIMEOUT_S)
    wait_for(lambda: counter_lines(counter_of(trainer)) == ["start"], 20, "the trainer to start")
    topology.kill("trainer-proxy")
    for pgid in {proc.pgid for proc in leftovers(run_id)}:
        os.killpg(pgid, signal.SIGKILL)
    wait_for(lambda: leftovers(run_id) == [], 10, "the trainer to die")

    topology.start("trainer-proxy")
    events = topology.wait(run_id, {"training.failed"}, timeout_s=RUN_TIMEOUT_S)
    events = topology.settle(run_id)
    failed = [e for e in events if e["schema"] == "training.failed"]
    assert len(failed) == 1 and failed[0]["error_type"] == "TrainingInterrupted", failed
    assert "approve a new run" in failed[0]["reason"]
    assert counter_lines(counter_of(trainer)) == ["start"], "the trainer was started again"
    assert not [e for e in events if e["schema"].startswith(AFTER_TRAINING)]
    kept = manifest_paths(topology.bundle_root / run_id)
    assert {"training/argv.json", "training/capture.json", "training/stdout.log", "training/stderr.log"} <= kept
    code, status = topology.status(run_id)
    assert code == 1 and status["halted"]
    training = next(s for s in status["steps"] if s["step"] == "training")
    assert training["state"] == "failed" and training["detail"] == failed[0]["reason"]


# --- Redis SIGKILLed mid-run ------------------------------------------------------


def test_redis_killed_mid_run_and_restarted_loses_no_event(toy_target: Path, tmp_path: Path) -> None:
    """Redis, with compose's own configuration (infra/redis.conf: AOF, appendfsync
    everysec), is SIGKILLed while the trainer runs, for longer than a step's lease and
    the reclaim idle time, and comes back from its AOF: every event published before
    the kill is still there, no step runs twice (the trainer started once, the bench
    executed once, no server launched twice), and the run completes with each event
    once in the bundle's journal and no lost event named in its manifest."""
    redis_server = RedisServer(tmp_path / "redis", config=ROOT / "infra/redis.conf")
    redis_server.start()
    topology = Topology(redis_url=redis_server.url, prefix=f"rel{uuid.uuid4().hex[:8]}", root=tmp_path / "topology")
    try:
        topology.start_all()
        trainer = write_trainer(tmp_path / "trainer")
        campaign = write_campaign(tmp_path / "campaign.yaml", target=toy_target, traffic=TRAFFIC, trainer=trainer,
                                  trainer_sleep_s=6)
        run_id = topology.submit(campaign)
        topology.wait(run_id, {"training.started"}, timeout_s=RUN_TIMEOUT_S)
        # Mid-run means every service is serving: one still in its own start (the publisher
        # imports the most) would meet the outage there, a different case from this one.
        topology.wait_started(timeout_s=RUN_TIMEOUT_S)
        before = {e["event_id"]: e["schema"] for e in topology.events(run_id)}

        redis_server.kill()
        time.sleep(4.0)  # past the lease (2 s) and the reclaim idle time (3 s)
        redis_server.start()
        after = {e["event_id"] for e in topology.events(run_id)}
        lost = {event_id: schema for event_id, schema in before.items() if event_id not in after}
        assert not lost, f"events lost with Redis: {lost}"

        topology.wait(run_id, {"report.published"}, timeout_s=RUN_TIMEOUT_S)
        events = topology.settle(run_id)
        assert_completed_once(events)
        assert counter_lines(counter_of(trainer)) == ["start", "done"], "the trainer started once"
        run_dir = topology.bundle_root / run_id
        assert len(list((run_dir / "bench/attempts").iterdir())) == 1, "the bench executed once"
        assert not [p for p in run_dir.rglob("attempt-*") if p.is_dir()], "no server launched a second time"
        assert dead_letters(topology, run_id) == []
        assert_journal_complete(topology, run_id, events)
        assert orjson.loads((run_dir / "manifest.json").read_bytes())["lost_events"] == [], "the manifest names a loss"
        assert leftovers(run_id) == []
    finally:
        topology.stop()
        redis_server.stop()


# --- bad inputs -------------------------------------------------------------------


def test_submit_refuses_a_missing_traffic_file(topology: Topology, toy_target: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-traffic.jsonl"
    campaign = write_campaign(tmp_path / "campaign.yaml", target=toy_target, traffic=missing,
                              trainer=write_trainer(tmp_path / "trainer"))
    proc = topology.cli("submit", str(campaign))
    assert proc.returncode != 0, proc.stdout
    assert str(missing) in proc.stderr and "nothing was published" in proc.stderr, proc.stderr
    client = topology.client()
    try:
        assert list(client.scan_iter(match=f"{topology.prefix}*")) == [], "submit published or stored something"
    finally:
        client.close()
    assert not topology.bundle_root.exists() or not any(topology.bundle_root.iterdir())


@pytest.fixture(scope="module")
def bad_runs(redis_url: str, toy_target: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Four bad campaigns on one topology, each waited for until it halts and
    nothing more happens.

    The first three are submitted before the services start (their events wait
    in the streams), so the first one's traffic file is deleted between its
    submit and its profile step without a race. The dying-server campaign goes
    after they halted: the local capacity check counts every labelled process on
    the machine as a workload, so it must not meet another run's trainer."""
    base = tmp_path_factory.mktemp("bad")
    topology = Topology(redis_url=redis_url, prefix=f"rel{uuid.uuid4().hex[:8]}", root=base / "topology")
    deleted = base / "deleted-traffic.jsonl"
    deleted.write_bytes(TRAFFIC.read_bytes())
    no_outputs = base / "prompts-without-outputs.jsonl"
    no_outputs.write_text("".join(
        json.dumps({"prompt": f"Question {i}: what is {i} plus {3 * i}? Explain briefly."}) + "\n" for i in range(60)
    ))
    dying = [
        sys.executable, "-c", "import sys; print('engine: cannot allocate the KV cache', file=sys.stderr); sys.exit(3)",
        "--max-model-len", "{max_model_len}", "{enforce_eager_flag}",  # what `specdec submit` requires
    ]
    waves: list[dict[str, dict[str, Any]]] = [
        {
            "traffic-deleted": {"traffic": deleted},
            "corpus-fails": {"traffic": no_outputs},
            "trainer-fails": {"traffic": TRAFFIC, "trainer_exit": 3},
        },
        {"server-dies": {"traffic": TRAFFIC, "standing_serve": dying, "train_draft": False}},
    ]
    runs: dict[str, Any] = {}
    try:
        for wave in waves:
            for name, spec in wave.items():
                trainer = write_trainer(base / name / "trainer")
                campaign = write_campaign(base / name / "campaign.yaml", target=toy_target, trainer=trainer, **spec)
                runs[name] = {"run_id": topology.submit(campaign), "trainer": trainer}
            if not topology.procs:
                deleted.unlink()
                topology.start_all()
            for name in wave:
                run = runs[name]
                # Each should halt at a `.failed`; one that wrongly completes returns too.
                topology.wait(run["run_id"], {"report.published"}, timeout_s=RUN_TIMEOUT_S)
                run["events"] = topology.settle(run["run_id"])
                run["bundle"] = topology.bundle_root / run["run_id"]
                run["status"] = topology.status(run["run_id"])
                run["leftovers"] = leftovers(run["run_id"])
        yield {"topology": topology, "runs": runs}
    finally:
        topology.stop()
        drop_keys(redis_url, topology.prefix)


def halted_at(run: dict[str, Any], step: str) -> dict[str, Any]:
    """The run's one `<step>.failed`; checks that it is the run's last event, that
    `specdec status` shows the step failed with that reason, and that no step after
    it ran."""
    events = run["events"]
    failed = [e for e in events if e["schema"].endswith(".failed")]
    assert [e["schema"] for e in failed] == [f"{step}.failed"], [(e["schema"], e.get("reason")) for e in failed]
    assert events[-1]["schema"] == f"{step}.failed", f"something ran after the failure: {[e['schema'] for e in events]}"
    code, status = run["status"]
    assert code == 1 and status["halted"]
    states = {s["step"]: s for s in status["steps"]}
    assert states[step]["state"] == "failed" and states[step]["detail"] == failed[0]["reason"]
    order = [s["step"] for s in status["steps"]]
    assert all(states[later]["state"] == "pending" for later in order[order.index(step) + 1:]), status
    assert run["leftovers"] == []
    return failed[0]


def no_bench(run: dict[str, Any]) -> None:
    assert not [e["schema"] for e in run["events"] if e["schema"].startswith("bench.")], (
        "a server was planned or started"
    )


def test_traffic_deleted_after_submit_fails_the_profile(bad_runs: dict[str, Any]) -> None:
    run = bad_runs["runs"]["traffic-deleted"]
    failed = halted_at(run, "profile")
    assert failed["error_type"] == "TrafficNotFound"
    assert "deleted-traffic.jsonl" in failed["reason"] and "cannot read" in failed["reason"]
    no_bench(run)
    assert {"campaign.json", "campaign.yaml"} <= manifest_paths(run["bundle"])
    # The journal reads each stream on its own: its lines follow arrival, not production order.
    assert sorted(e["schema"] for e in journal(run["bundle"])) == ["campaign.submitted", "profile.failed"]


def test_traffic_without_outputs_fails_the_corpus(bad_runs: dict[str, Any]) -> None:
    run = bad_runs["runs"]["corpus-fails"]
    failed = halted_at(run, "corpus")
    assert failed["error_type"] == "TrafficUnusable"
    assert "no usable record" in failed["reason"] and "no_output_tokens" in failed["reason"]
    no_bench(run)
    assert "profile/PROFILE.json" in manifest_paths(run["bundle"]), "the profile that was produced is kept"


def test_trainer_exiting_non_zero_fails_training_and_keeps_its_logs(bad_runs: dict[str, Any]) -> None:
    run = bad_runs["runs"]["trainer-fails"]
    failed = halted_at(run, "training")
    assert failed["error_type"] == "TrainerFailed"
    assert "exited 3" in failed["reason"] and "giving up with exit 3" in failed["reason"], failed["reason"]
    no_bench(run)
    kept = manifest_paths(run["bundle"])
    assert {"training/plan.json", "training/argv.json", "training/stdout.log", "training/stderr.log",
            "training/capture.json", "training/outputs.json"} <= kept, sorted(kept)
    assert {ref["uri"].split("/", 3)[3] for ref in failed["artifacts"]} >= {
        "training/stderr.log",
        "training/capture.json",
    }
    assert b"giving up" in (run["bundle"] / "training/stderr.log").read_bytes()
    assert counter_lines(counter_of(run["trainer"])) == ["start"]


def test_server_dying_at_start_fails_the_bench(bad_runs: dict[str, Any]) -> None:
    run = bad_runs["runs"]["server-dies"]
    failed = halted_at(run, "bench")
    assert failed["error_type"] == "StandingCellFailed"
    assert "exited with 3" in failed["reason"] and "cannot allocate the KV cache" in failed["reason"], failed["reason"]
    schemas = counts(run["events"])
    assert schemas.get("training.completed") == 1  # skipped: no cell needs a draft
    kept = manifest_paths(run["bundle"])
    assert {"bench/plan.json", "bench/prompts.jsonl", "bench/standing/launch-0/server.log"} <= kept, sorted(kept)
    assert b"cannot allocate the KV cache" in (run["bundle"] / "bench/standing/launch-0/server.log").read_bytes()
