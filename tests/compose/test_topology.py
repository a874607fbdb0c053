"""compose.yaml's CPU profile, run for real: a campaign inside the containers, Redis restarted mid-run.

Run by `make test-compose` (infra/bin/test-compose), which builds the images
from scratch and removes everything labelled with the run afterwards; not part
of `make test`'s lanes (infra/bin/run-tests names its paths). Without the
run's environment the module is skipped.

One module-scoped fixture brings the topology up with the test's override
(tests/compose/topology.py), builds the toy target on the host
(infra/examples/toy_target.py) into the bind-mounted models folder, submits
the cheapest real campaign with the `cli` service, restarts the Redis
container once when the first trial result is announced, and waits for
`report.published`. The tests read what the run left: the events on the
streams (from the host, through the compose Redis) and the bundle on the
bind-mounted folder.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
import yaml

from tests.compose.topology import MODELS_IN, ROOT, Topology, campaign, expected_trials
from tests.support.campaigns import run_events

pytestmark = pytest.mark.skipif(
    "SPECDEC_COMPOSE_RUN" not in os.environ, reason="run by `make test-compose` (infra/bin/test-compose)")

RUN_TIMEOUT_S = 1800
HEALTHY_TIMEOUT_S = 300
# The event whose first appearance triggers the Redis restart: mid-bench, with
# trials, the bench's end, the gate and the report still to come.
RESTART_AFTER = "bench.trial.completed"
# Long enough that the services must publish, read and ack across the outage, not between two polls
# (SPECDEC_COMPOSE_REDIS_DOWN_S=0 makes it a plain `docker restart`).
REDIS_DOWN_S = float(os.environ.get("SPECDEC_COMPOSE_REDIS_DOWN_S", "5"))
STEPS = ("campaign.submitted", "profile.completed", "corpus.completed", "capacity.selected", "bench.planned",
         "bench.trial.completed", "bench.completed", "gate.decided", "report.rendered", "report.published")


@dataclass
class ComposeRun:
    topology: Topology
    run_id: str
    campaign: Path
    events: list[dict[str, Any]]
    before_restart: list[dict[str, Any]]
    redis_down_s: float
    timings_s: dict[str, float] = field(default_factory=dict)

    @property
    def bundle(self) -> Path:
        return self.topology.bundles / self.run_id

    def of(self, schema: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["schema"] == schema]


def _events(client: redis.Redis, topo: Topology, run_id: str) -> list[dict[str, Any]] | None:
    """The run's events, or None while Redis does not answer (it is being restarted)."""
    try:
        return run_events(client, topo.prefix, run_id)
    except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
        return None


def _restart_redis(topo: Topology, client: redis.Redis) -> float:
    """Restart the Redis container: stop it (SIGTERM), leave it down for REDIS_DOWN_S while the services
    go on working, start it again; seconds from the stop until it answers PING again."""
    container = topo.containers()["redis"]
    assert client.info("persistence")["aof_enabled"] == 1
    started = time.monotonic()
    topo.docker_cmd("stop", "--time", "10", container)
    time.sleep(REDIS_DOWN_S)
    topo.docker_cmd("start", container)
    while time.monotonic() - started < 120:
        try:
            if client.ping():
                return time.monotonic() - started
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
            pass
        time.sleep(0.2)
    raise AssertionError("the restarted Redis container did not answer PING within 120 s")


def _build_target(topo: Topology) -> str:
    """The toy target (cached by content on the host, as `make test`'s e2e builds it), copied into the models
    folder; its path as the containers see it."""
    sys.path.insert(0, str(ROOT / "infra/examples"))
    # The example builder is a script beside the examples, not a package.
    import toy_target as builder

    built = Path(builder.build_target(ROOT / "infra/examples/sample-traffic.jsonl", ROOT / ".run/examples/toy-target",
                                      seed=0))
    copy = shutil.copytree(built, topo.models / "toy-target")
    # The build's folder is private to its owner (a temporary folder renamed); the services (uid 10001) read it.
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return f"{MODELS_IN}/toy-target"


@pytest.fixture(scope="module")
def compose_run() -> Iterator[ComposeRun]:
    topo = Topology.from_env()
    topo.write_override()
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    target_in = _build_target(topo)
    shutil.copy(ROOT / "infra/examples/sample-traffic.jsonl", topo.models / "sample-traffic.jsonl")
    camp = campaign(topo.models / "campaign.yaml", target_in=target_in, traffic_in=f"{MODELS_IN}/sample-traffic.jsonl")
    timings["toy_target_s"] = time.monotonic() - t0
    client: redis.Redis | None = None
    try:
        t0 = time.monotonic()
        topo.compose("up", "-d", "--no-build", timeout_s=HEALTHY_TIMEOUT_S)
        waited = [name for name in topo.health_ports if name not in ("cli", "bench-runner")]
        topo.wait_healthy(["redis", *waited], HEALTHY_TIMEOUT_S)
        timings["up_healthy_s"] = time.monotonic() - t0
        # The test reads every stream as the operator (Redis has no open door: the default user is off).
        client = redis.Redis.from_url(topo.operator_url(), socket_timeout=10)

        t0 = time.monotonic()
        out = topo.compose("run", "--rm", "-T", "--no-deps", "cli", "specdec", "submit", f"{MODELS_IN}/campaign.yaml",
                           timeout_s=300)
        run_id = out.stdout.strip().splitlines()[-1]
        before: list[dict[str, Any]] = []
        down_s = -1.0
        deadline = time.monotonic() + RUN_TIMEOUT_S
        events: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            events = _events(client, topo, run_id) or events
            schemas = {e["schema"] for e in events}
            if not before and RESTART_AFTER in schemas:
                before = list(events)
                timings["restart_at_s"] = time.monotonic() - t0
                down_s = _restart_redis(topo, client)
                continue
            if "report.published" in schemas or any(s.endswith(".failed") for s in schemas):
                break
            time.sleep(2)
        else:
            raise AssertionError(f"run {run_id} did not publish its report within {RUN_TIMEOUT_S}s; "
                                 f"saw {sorted({e['schema'] for e in events})}")
        # The journal may trail the last event by a moment.
        time.sleep(5)
        events = run_events(client, topo.prefix, run_id)
        timings["campaign_s"] = time.monotonic() - t0
        print(f"\ncompose run {topo.run}: run {run_id}; " + ", ".join(f"{k}={v:.1f}" for k, v in timings.items())
              + f", redis_down_s={down_s:.1f}")
        yield ComposeRun(topology=topo, run_id=run_id, campaign=camp, events=events, before_restart=before,
                         redis_down_s=down_s, timings_s=timings)
    finally:
        if client is not None:
            client.close()
        topo.save_logs(topo.work / "logs")
        topo.compose("down", "--volumes", "--remove-orphans", "--timeout", "30", timeout_s=300, check=False)


def test_the_campaign_ran_every_step_and_published_its_report(compose_run: ComposeRun) -> None:
    schemas = [e["schema"] for e in compose_run.events]
    logs = compose_run.topology.work / "logs/compose.log"
    assert not [s for s in schemas if s.endswith(".failed")], f"{schemas}; logs in {logs}"
    for schema in STEPS:
        assert schema in schemas, f"{schema} missing from {schemas}; logs in {logs}"
    assert "training.started" not in schemas, "the campaign names no draft: nothing should train"


def test_the_redis_restart_lost_no_event(compose_run: ComposeRun) -> None:
    assert compose_run.before_restart, f"Redis was never restarted: {RESTART_AFTER} not seen before the end"
    assert compose_run.redis_down_s >= 0
    after = {e["event_id"] for e in compose_run.events}
    lost = [e["schema"] for e in compose_run.before_restart if e["event_id"] not in after]
    assert lost == [], f"events announced before the restart are gone from the streams: {lost}"
    # Announced after the restart too: every trial and every later step.
    trials = {(e["cell_id"], e["trial"], e["concurrency"]) for e in compose_run.of("bench.trial.completed")}
    assert trials == expected_trials(compose_run.campaign)
    # A retried bench emits the trials it adopted again under the same event ID: counted by ID.
    ids = {e["event_id"] for e in compose_run.of("bench.trial.completed")}
    assert len(ids) == len(trials), "a trial was announced twice under two event IDs"


def test_the_journal_holds_every_event_of_the_streams(compose_run: ComposeRun) -> None:
    journal = [orjson.loads(line) for line in (compose_run.bundle / "events.jsonl").read_bytes().splitlines()]
    ids = [e["event_id"] for e in journal]
    assert len(ids) == len(set(ids)), "the journal holds an event twice"
    missing = [e["schema"] for e in compose_run.events if e["event_id"] not in set(ids)]
    assert missing == [], f"on the streams but not in the journal: {missing}"


def test_the_bundle_holds_every_trial_result_and_the_report(compose_run: ComposeRun) -> None:
    bundle = compose_run.bundle
    found = set()
    for path in bundle.glob("bench/*/trial-*/result-c*.json"):
        result = orjson.loads(path.read_bytes())
        assert result.get("completed", 0) > 0, f"{path}: no completed request"
        found.add(
            (path.parts[-3], int(path.parent.name.removeprefix("trial-")), int(path.stem.removeprefix("result-c")))
        )
    assert found == expected_trials(compose_run.campaign)
    assert (bundle / "gate/DECISION.json").is_file()
    assert (bundle / "report/report.html").is_file() and (bundle / "report/report.md").is_file()


def test_no_service_died_or_restarted(compose_run: ComposeRun) -> None:
    topo = compose_run.topology
    states = {svc: topo.state(cid) for svc, cid in topo.containers().items()}
    # A one-shot step (compose's `restart: "no"`, the Redis users' generation) is done when it exited 0.
    one_shot = {name for name, svc in yaml.safe_load((ROOT / "compose.yaml").read_text())["services"].items()
                if svc.get("restart") == "no"}
    died = {
        svc: (s["Status"], s.get("RestartCount", 0), s.get("ExitCode"))
        for svc, s in states.items()
        if s["Status"] != "running" and not (svc in one_shot and s["Status"] == "exited" and s.get("ExitCode") == 0)
    }
    assert died == {}, f"containers not running after the campaign: {died}; logs in {topo.work / 'logs'}"
    restarts = {svc: int(topo.docker_cmd("inspect", "--format", "{{.RestartCount}}", cid))
                for svc, cid in topo.containers().items()}
    assert {svc: n for svc, n in restarts.items() if n} == {}, f"containers restarted by Docker: {restarts}"
