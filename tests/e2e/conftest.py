"""The one shared e2e campaign (README.md#contributing).

Session-scoped: builds (or reuses, by content hash) the toy target, starts every
built service as its own process against a real Redis with a prefix of this
session, submits the demo campaign at reduced sizes — a standing cell without
speculation, an ngram candidate, a draft trained by the example trainer, a
cell whose operator serve command drops its declared speculation, and one whose
operator wrapper script drops its declared max_num_seqs — acknowledged and
pre-approved (review.pre_approve) for this machine's local executor, and waits for the report to be published.
Every e2e assertion reads what this one run left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from services.runtime import apps
from services.runtime.processes.procs import labelled_processes
from tests.support.campaigns import run_events

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / ".run" / "examples"
RUN_TIMEOUT_S = 1500


@dataclass
class CampaignRun:
    run_id: str
    bundle_dir: Path
    env: dict[str, str]
    events: list[dict[str, Any]]
    logs: Path
    elapsed_s: float
    # The bench-runner's SIGKILLs mid-bench: after how many trial events, and what carried the run's label then.
    kills: list[dict[str, Any]] = field(default_factory=list)

    def of(self, schema: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("schema") == schema]


# An operator wrapper that drops `--speculative-config VALUE` and execs vLLM's server with the rest.
DROP_SPECULATIVE_CONFIG = (
    "import os, sys; a = sys.argv[1:]; i = a.index('--speculative-config'); del a[i:i + 2]; "
    "os.execv(sys.executable, [sys.executable, '-m', 'vllm.entrypoints.openai.api_server', *a])"
)


# An operator's wrapper script: it receives `--max-num-seqs N` (so `specdec submit`
# accepts the template) and drops it before it execs vLLM's server with the rest.
DROP_MAX_NUM_SEQS = """\
import os, sys
args = sys.argv[1:]
at = args.index("--max-num-seqs")
del args[at:at + 2]
os.execv(sys.executable, [sys.executable, "-m", "vllm.entrypoints.openai.api_server", *args])
"""


def campaign_file(path: Path, *, pre_approved: bool, target: Path) -> Path:
    """The toy campaign in the workflow's canonical matrix shape: the standing, ngram and draft cells are the
    operator's exact `vllm serve` commands (literal --speculative-config JSON, the trained draft named by
    `{training.output}` inside it), read by vLLM's own parser; two wrapper cells declare their serving config
    in specdec's keys, which their commands cannot show."""
    wrapper = path.parent / "serve_wrapper.py"
    wrapper.write_text(DROP_MAX_NUM_SEQS)
    toy = yaml.safe_load((ROOT / "infra/examples/toy-campaign.yaml").read_text())
    own = {key: toy[key] for key in ("target", "standing", "traffic", "corpus", "capacity", "gate", "publish",
                                     "review", "acknowledgements", "source_revisions")}
    own["target"]["checkpoint"] = str(target)
    own["commands"] = {"train": {**toy["commands"]["train"], "argv": [
        sys.executable, str(ROOT / "infra/examples/train_draft.py"),
        "--corpus", "{corpus_train}", "--target", "{target}", "--out", "{output_dir}", "--heldout", "{corpus_heldout}",
    ]}}
    # Acknowledged either way: the policy alone decides whether plans run without
    # a separate approval (the review point always holds).
    own["acknowledgements"]["i_understand_this_mutates_cluster"] = True
    if not pre_approved:
        own["review"]["pre_approve"] = []
    own["load"] = {**toy["matrix"]["load"], "num_prompts": 8, "warmup_requests": 1, "max_output_tokens": 32}
    serve = f"vllm serve {target} --max-model-len 512 --enforce-eager --host 127.0.0.1 --port 8000"
    cells = []
    for cell in toy["matrix"]["cells"]:
        spec = {k: v for k, v in (cell["serving"]["speculative"] or {}).items() if v is not None}
        cells.append({
            "cell_id": cell["cell_id"], "id": cell["cell_id"], "backend": "vllm-sweep", "concurrencies": [1, 2],
            "notes": f"{cell['cell_id']}: the operator's command as their cluster runs it", "hardware": "cpu",
            "tensor_parallel": 1, "vllm_sweep": {"serve_cmd": serve + (f" --speculative-config '{json.dumps(spec)}'"
                                                                       if spec else "")},
        })
    # The operator's own wrapper for this cell receives --speculative-config (so
    # `specdec submit` accepts the template) and drops it before it execs vLLM:
    # only the run-time checks can expose it (the read-back of the engine's
    # config does, before any trial; the counters would next).
    cells.append({
        "cell_id": "dropped-spec", "backend": "vllm-sweep", "concurrencies": [1, 2],
        "serving": {"graph_mode": "eager", "speculative": {"method": "ngram", "num_speculative_tokens": 3}},
        "vllm_sweep": {"serve_cmd": [
            sys.executable, "-c", DROP_SPECULATIVE_CONFIG, "--model", "{model}", "--max-model-len", "{max_model_len}",
            "--enforce-eager", "--host", "127.0.0.1", "--port", "{port}",
            "--speculative-config", "{speculative_config_json}",
        ]},
    })
    # A declared max_num_seqs the wrapper drops: no counter shows it, only the
    # read-back of the engine's config can (it fails the cell before any trial).
    cells.append({
        "cell_id": "dropped-max-num-seqs", "backend": "vllm-sweep", "concurrencies": [1, 2],
        "serving": {"graph_mode": "eager", "max_num_seqs": 8, "speculative": None},
        "vllm_sweep": {"serve_cmd": [
            sys.executable, str(wrapper), "--model", "{model}", "--max-model-len", "{max_model_len}",
            "--enforce-eager", "--host", "127.0.0.1", "--port", "{port}", "--max-num-seqs", "{max_num_seqs}",
        ]},
    })
    data = {"name": "toy campaign, canonical shape", "description": "the shared e2e campaign", "family": "toy-llama",
            "provenance": {"source": "tests/e2e/conftest.py"}, "campaign": {"comparator_baseline": "standing"},
            "cells": cells, **own}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def wait_run(client: redis.Redis, prefix: str, run_id: str, done: set[str], *, timeout_s: float,
             poll_s: float = 2.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events = run_events(client, prefix, run_id)
        schemas = {e["schema"] for e in events}
        if (
            done & schemas
            or any(s.endswith(".failed") and s != "bench.failed" for s in schemas)
            or "bench.failed" in schemas
        ):
            return events
        time.sleep(poll_s)
    raise AssertionError(f"run {run_id} did not reach {done} within {timeout_s}s; saw {sorted(schemas)}")


# Delivery settings of the shared topology: a SIGKILLed bench-runner's message is reclaimed by its
# restarted instance within about 7 s (the default, 30 s plus a 10 s poll, would spend a minute
# on each of the campaign's two bench-runner kills); the heartbeat (2 s) stays well inside the lease (4 s).
DELIVERY = {"SPECDEC_RECLAIM_IDLE_MS": "6000", "SPECDEC_RECLAIM_POLL_MS": "500"}


@dataclass
class SessionServices:
    """Every built service as its own process; one may be SIGKILLed and started again."""

    env: dict[str, str]
    logs: Path
    procs: dict[str, subprocess.Popen[bytes]]
    starts: dict[str, int]

    def start(self, name: str) -> None:
        count = self.starts.get(name, 0) + 1
        self.starts[name] = count
        with (self.logs / (f"{name}.log" if count == 1 else f"{name}.{count}.log")).open("wb") as log:
            self.procs[name] = subprocess.Popen([sys.executable, "-m", "services.runtime.main", name], env=self.env,
                                                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)

    def kill(self, name: str) -> None:
        """SIGKILL, as a node's OOM killer or a pod eviction would: no shutdown, no cleanup."""
        self.procs[name].kill()
        self.procs[name].wait()

    def stop(self) -> None:
        for child in self.procs.values():
            child.terminate()
        for child in self.procs.values():
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


@pytest.fixture(scope="session")
def session_services(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionServices]:
    """Every built service as its own process, on a prefix and bundle root of this session."""
    base = tmp_path_factory.mktemp("e2e")
    env = dict(os.environ)
    env.update({
        "PYTHONPATH": str(ROOT),
        "SPECDEC_REDIS_URL": redis_url,
        "SPECDEC_STREAM_PREFIX": f"e2e{uuid.uuid4().hex[:8]}",
        "SPECDEC_BUNDLE_ROOT": str(base / "bundles"),
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")]),
        **DELIVERY,
    })
    env.pop("SPECDEC_OPERATOR_REDIS_URL", None)  # the services never hold the operator's Redis user
    logs = base / "logs"
    logs.mkdir()
    env["E2E_LOGS"] = str(logs)
    services = SessionServices(env=env, logs=logs, procs={}, starts={})
    for name in apps.available():
        services.start(name)
    try:
        yield services
    finally:
        services.stop()


@pytest.fixture(scope="session")
def services_env(session_services: SessionServices) -> dict[str, str]:
    return session_services.env


def submit_campaign(env: dict[str, str], campaign: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "services.cli.main", "submit", str(campaign)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def toy_target() -> Path:
    sys.path.insert(0, str(ROOT / "infra/examples"))
    import toy_target as builder  # imported here: the example builder is a script, not a package

    return Path(builder.build_target(ROOT / "infra/examples/sample-traffic.jsonl", MODELS / "toy-target", seed=0))


def kill_bench_runner_mid_bench(services: SessionServices, client: redis.Redis, run_id: str, *,
                                after_trials: int) -> dict[str, Any]:
    """Once the run has `after_trials` trial events and no bench.completed, SIGKILL the bench-runner and
    start it again; what its death left carrying the run's label (its server's engine) is returned."""
    prefix = services.env["SPECDEC_STREAM_PREFIX"]
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        schemas = [e["schema"] for e in run_events(client, prefix, run_id)]
        if "bench.completed" in schemas or any(s.endswith(".failed") for s in schemas):
            raise AssertionError(
                f"the bench ended before the kill after {after_trials} trial(s): {sorted(set(schemas))}"
            )
        if schemas.count("bench.trial.completed") >= after_trials:
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"run {run_id} reached no {after_trials} trial(s) within {RUN_TIMEOUT_S} s")
    services.kill("bench-runner")
    time.sleep(1)  # the parent-death signal reaches the server's first process; what outlives it stays
    left = [{"pid": p.pid, "pgid": p.pgid} for p in labelled_processes() if p.run_id == run_id]
    services.start("bench-runner")
    return {"after_trials": after_trials, "left": left}


@pytest.fixture(scope="session")
def campaign_run(session_services: SessionServices, toy_target: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> CampaignRun:
    services_env = session_services.env
    started = time.monotonic()
    campaign = campaign_file(
        tmp_path_factory.mktemp("campaign") / "campaign.yaml", pre_approved=True, target=toy_target
    )
    run_id = submit_campaign(services_env, campaign)
    client = redis.Redis.from_url(services_env["SPECDEC_REDIS_URL"])
    prefix = services_env["SPECDEC_STREAM_PREFIX"]
    # Twice mid-bench, the bench-runner is SIGKILLed and started again: the run must still publish,
    # count every trial once, and leave no engine behind (tests/e2e/test_campaign.py).
    kills = [kill_bench_runner_mid_bench(session_services, client, run_id, after_trials=1)]
    kills.append(kill_bench_runner_mid_bench(session_services, client, run_id, after_trials=3))
    events = wait_run(client, prefix, run_id, {"report.published"}, timeout_s=RUN_TIMEOUT_S)
    # The journal may trail the last event by a moment.
    time.sleep(3)
    events = run_events(client, prefix, run_id)
    client.close()
    return CampaignRun(run_id=run_id, bundle_dir=Path(services_env["SPECDEC_BUNDLE_ROOT"]) / run_id, env=services_env,
                       events=events, logs=Path(services_env["E2E_LOGS"]), elapsed_s=time.monotonic() - started,
                       kills=kills)


@pytest.fixture(scope="session")
def dry_run(services_env: dict[str, str], toy_target: Path, campaign_run: CampaignRun,
            tmp_path_factory: pytest.TempPathFactory) -> CampaignRun:
    """The same campaign, acknowledged but with no pre-approval policy: it must stop at its first plan."""
    campaign = campaign_file(tmp_path_factory.mktemp("dry") / "campaign.yaml", pre_approved=False, target=toy_target)
    run_id = submit_campaign(services_env, campaign)
    client = redis.Redis.from_url(services_env["SPECDEC_REDIS_URL"])
    prefix = services_env["SPECDEC_STREAM_PREFIX"]
    events = wait_run(client, prefix, run_id, {"training.planned"}, timeout_s=300)
    time.sleep(5)  # anything that would (wrongly) start next has time to show
    events = run_events(client, prefix, run_id)
    client.close()
    return CampaignRun(run_id=run_id, bundle_dir=Path(services_env["SPECDEC_BUNDLE_ROOT"]) / run_id, env=services_env,
                       events=events, logs=Path(services_env["E2E_LOGS"]), elapsed_s=0.0)
