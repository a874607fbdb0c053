"""The one shared e2e campaign (DESIGN.md, "Tests and CI time").

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from services.runtime import apps
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


def wait_run(client: redis.Redis, prefix: str, run_id: str, done: set[str], timeout_s: float, *,
             poll_s: float = 2.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events = run_events(client, prefix, run_id)
        schemas = {e["schema"] for e in events}
        if done & schemas or any(s.endswith(".failed") and s != "bench.failed" for s in schemas) or "bench.failed" in schemas:
            return events
        time.sleep(poll_s)
    raise AssertionError(f"run {run_id} did not reach {done} within {timeout_s}s; saw {sorted(schemas)}")


@pytest.fixture(scope="session")
def services_env(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Every built service as its own process, on a prefix and bundle root of this session."""
    base = tmp_path_factory.mktemp("e2e")
    env = dict(os.environ)
    env.update({
        "PYTHONPATH": str(ROOT),
        "SPECDEC_REDIS_URL": redis_url,
        "SPECDEC_STREAM_PREFIX": f"e2e{uuid.uuid4().hex[:8]}",
        "SPECDEC_BUNDLE_ROOT": str(base / "bundles"),
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")]),
    })
    logs = base / "logs"
    logs.mkdir()
    env["E2E_LOGS"] = str(logs)
    children = []
    for name in apps.available():
        log = (logs / f"{name}.log").open("wb")
        children.append(subprocess.Popen([sys.executable, "-m", "services.runtime.main", name], env=env, cwd=ROOT,
                                         stdout=log, stderr=subprocess.STDOUT))
    try:
        yield env
    finally:
        for child in children:
            child.terminate()
        for child in children:
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def submit_campaign(env: dict[str, str], campaign: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "services.cli.main", "submit", str(campaign)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def toy_target() -> Path:
    sys.path.insert(0, str(ROOT / "infra/examples"))
    import toy_target as builder  # noqa: PLC0415 - the example builder is a script, not a package

    return Path(builder.build_target(ROOT / "infra/examples/sample-traffic.jsonl", MODELS / "toy-target", seed=0))


@pytest.fixture(scope="session")
def campaign_run(services_env: dict[str, str], toy_target: Path, tmp_path_factory: pytest.TempPathFactory) -> CampaignRun:
    started = time.monotonic()
    campaign = campaign_file(tmp_path_factory.mktemp("campaign") / "campaign.yaml", pre_approved=True, target=toy_target)
    run_id = submit_campaign(services_env, campaign)
    client = redis.Redis.from_url(services_env["SPECDEC_REDIS_URL"])
    prefix = services_env["SPECDEC_STREAM_PREFIX"]
    events = wait_run(client, prefix, run_id, {"report.published"}, RUN_TIMEOUT_S)
    # The journal may trail the last event by a moment.
    time.sleep(3)
    events = run_events(client, prefix, run_id)
    client.close()
    return CampaignRun(run_id=run_id, bundle_dir=Path(services_env["SPECDEC_BUNDLE_ROOT"]) / run_id, env=services_env,
                       events=events, logs=Path(services_env["E2E_LOGS"]), elapsed_s=time.monotonic() - started)


@pytest.fixture(scope="session")
def dry_run(services_env: dict[str, str], toy_target: Path, campaign_run: CampaignRun,
            tmp_path_factory: pytest.TempPathFactory) -> CampaignRun:
    """The same campaign, acknowledged but with no pre-approval policy: it must stop at its first plan."""
    campaign = campaign_file(tmp_path_factory.mktemp("dry") / "campaign.yaml", pre_approved=False, target=toy_target)
    run_id = submit_campaign(services_env, campaign)
    client = redis.Redis.from_url(services_env["SPECDEC_REDIS_URL"])
    prefix = services_env["SPECDEC_STREAM_PREFIX"]
    events = wait_run(client, prefix, run_id, {"training.planned"}, 300)
    time.sleep(5)  # anything that would (wrongly) start next has time to show
    events = run_events(client, prefix, run_id)
    client.close()
    return CampaignRun(run_id=run_id, bundle_dir=Path(services_env["SPECDEC_BUNDLE_ROOT"]) / run_id, env=services_env,
                       events=events, logs=Path(services_env["E2E_LOGS"]), elapsed_s=0.0)
