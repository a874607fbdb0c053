"""The bench-runner through a real Redis, with stand-in servers (real processes,
real HTTP): plan -> approval -> trials -> bench.completed, and the guard that a
cell whose serve command drops its declared speculation fails loudly."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import orjson
import yaml

from contracts.campaign import Campaign
from contracts.events import BenchRequested, RunApproved
from services.bench import app
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.service import bootstrap
from services.runtime.main import resources_for
from services.runtime.processes.procs import labelled_processes
from tests.support.services import publish_approval, wait_events

ROOT = Path(__file__).resolve().parents[2]
# The stand-in logs vLLM's start-up config for what it is given; the bench-runner reads it back.
FAKE = [sys.executable, "-m", "tests.support.fake_vllm", "--port", "{port}", "--model", "{model}",
        "--max-model-len", "{max_model_len}", "{enforce_eager_flag}"]


def campaign(*, acknowledged: bool, pre_approve: tuple[str, ...] = ()) -> Campaign:
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["traffic"] = {"shapes": ["short"]}
    data["commands"].pop("train")
    data["source_revisions"].pop("trainer")  # refused with shapes: nothing is trained
    data["acknowledgements"]["i_understand_this_mutates_cluster"] = acknowledged
    data["review"] = {"pre_approve": list(pre_approve)}
    data["matrix"]["load"] = {"num_prompts": 4, "warmup_requests": 1, "max_output_tokens": 9}
    spec = {"method": "ngram", "num_speculative_tokens": 3}
    data["matrix"]["cells"] = [
        {"cell_id": "standing", "role": "standing", "concurrency": [1, 2],
         "vllm_sweep": {"serve_cmd": [*FAKE]}},
        {"cell_id": "ngram-k3", "role": "candidate", "concurrency": [1, 2], "serving": {"speculative": spec},
         "vllm_sweep": {"serve_cmd": [*FAKE, "--speculative-config", "{speculative_config_json}"]}},
        # The operator's wrapper receives the declared speculative config and drops it (the template carries it,
        # so submit and the plan accept it; the stand-in ignores the flag it is under): the read-back sees it.
        {"cell_id": "dropped", "role": "candidate", "concurrency": [1, 2], "serving": {"speculative": spec},
         "vllm_sweep": {"serve_cmd": [*FAKE, "--wrapper-drops-this", "{speculative_config_json}"]}},
        # An engine that says it speculates but never drafts: only its counters show it.
        {"cell_id": "idle-drafts", "role": "candidate", "concurrency": [1, 2], "serving": {"speculative": spec},
         "vllm_sweep": {"serve_cmd": [*FAKE, "--speculative-config", "{speculative_config_json}", "--fake-no-drafts"]}},
    ]
    return Campaign.model_validate(data)


@asynccontextmanager
async def bench_runner(settings) -> AsyncIterator:
    async def idle(node: str) -> None:
        return None

    resources = resources_for(settings, bench_recheck=idle)
    service = bootstrap("bench-runner", app.routes(resources), settings=settings, resources=resources)
    await service.start()
    try:
        yield service
    finally:
        await service.stop(grace_s=1)


async def test_nothing_runs_before_approval_then_the_matrix_is_measured(settings):
    """The campaign carries the acknowledgement but no pre-approval policy: it stops at its plan."""
    run_id = "toy-20261130-050505-abcdef"
    bundle = BundleStore(settings.bundle_root)
    bundle.write_json(run_id, "campaign.json", campaign(acknowledged=True))
    async with bench_runner(settings) as service:
        await service.bus.publish(BenchRequested(run_id=run_id, producer="test", requested_by="test"))
        planned = (await wait_events(settings, {"bench.planned"}, run_id=run_id))["bench.planned"]
        assert planned["plan"]["sha256"] == bundle.ref(run_id, "bench/plan.json").sha256, "announced as stored"
        await asyncio.sleep(1.0)  # anything that would (wrongly) start at the trigger has time to show
        assert not list((bundle.run_dir(run_id) / "bench").glob("*/trial-*")), "nothing may run before approval"
        assert not list((bundle.run_dir(run_id) / "bench").glob("*/launch-*")), "no server may start before approval"
        assert not [p for p in labelled_processes("bench-runner") if p.run_id == run_id]
        plan = bundle.read_json(run_id, "bench/plan.json")
        assert [c["cell_id"] for c in plan["cells"]] == ["standing", "ngram-k3", "dropped", "idle-drafts"]

        await publish_approval(settings, RunApproved(run_id=run_id, producer="test",
                                                     i_understand_this_mutates_cluster=True,
                                                     plan_sha256s=["f" * 64], approved_by="test"))
        await publish_approval(settings, RunApproved(run_id=run_id, producer="test",
                                                     i_understand_this_mutates_cluster=True,
                                                     plan_sha256s=[planned["plan"]["sha256"]], approved_by="test"))
        done = (await wait_events(settings, {"bench.completed"}, run_id=run_id, timeout_s=120))["bench.completed"]

    assert set(done["failed_cells"]) == {"dropped", "idle-drafts"}
    # Caught by the read-back before any trial: the engine's own config names no speculation.
    dropped = done["failed_cells"]["dropped"]
    assert "speculative_method: declared 'ngram', effective 'none'" in dropped
    assert "num_speculative_tokens: declared 3" in dropped
    assert not list((bundle.run_dir(run_id) / "bench/dropped").glob("trial-*")), (
        "a trial ran after the read-back failed")
    check = bundle.read_json(run_id, "bench/dropped/launch-2/engine-config.json")
    assert {c["field"] for c in check["checks"] if not c["ok"]} == {"speculative_method", "num_speculative_tokens"}
    for cell, launch in (("standing", 0), ("ngram-k3", 1), ("idle-drafts", 3)):
        check = bundle.read_json(run_id, f"bench/{cell}/launch-{launch}/engine-config.json")
        assert all(c["ok"] for c in check["checks"]), (cell, check)
    effective = bundle.read_json(run_id, "bench/ngram-k3/launch-1/engine-config.json")["effective"]
    assert effective["num_speculative_tokens"] == 3
    # The engine logs the declared speculation but never drafts: its counters fail the cell.
    assert "speculation declared but not active as declared" in done["failed_cells"]["idle-drafts"]
    # Its first trial is kept whole as a rejected trial, under a name outside the results' glob.
    rejected = orjson.loads(bundle.read_bytes(run_id, "bench/idle-drafts/trial-0/rejected-c1.json"))
    assert rejected["identity"]["cell_id"] == "idle-drafts" and rejected["speculation_problems"]
    assert rejected["speculation_problems"][0] in done["failed_cells"]["idle-drafts"]
    assert not list(bundle.run_dir(run_id).glob("bench/idle-drafts/trial-*/result-*.json"))
    # 2 cells x 3 trials x 2 concurrency levels of results the gate may read.
    assert len(done["results"]) == 12
    result = orjson.loads(bundle.read_bytes(run_id, "bench/ngram-k3/trial-2/result-c2.json"))
    assert result["identity"]["cell_id"] == "ngram-k3" and result["identity"]["concurrency"] == 2
    assert result["spec_decode"]["num_drafts"] > 0 and len(result["spec_decode"]["accepted_per_position"]) == 3
    assert result["completed"] == 4 and result["max_concurrency"] == 2
    standing = orjson.loads(bundle.read_bytes(run_id, "bench/standing/trial-0/result-c1.json"))
    assert standing.get("spec_decode") is None
    assert result["evaluation"]["agreement_rate"] == 1.0
    argv = bundle.read_json(run_id, "bench/ngram-k3/launch-1/argv.json")["argv"]
    assert "{port}" not in " ".join(argv) and '"num_speculative_tokens": 3' in argv[-1]
    assert not [p for p in labelled_processes("bench-runner") if p.run_id == run_id], "cleanup left a server behind"


async def test_a_pre_approved_campaign_runs_at_its_trigger(settings):
    run_id = "toy-20261130-060606-abcdef"
    bundle = BundleStore(settings.bundle_root)
    bundle.write_json(run_id, "campaign.json", campaign(acknowledged=True, pre_approve=("bench",)))
    async with bench_runner(settings) as service:
        await service.bus.publish(BenchRequested(run_id=run_id, producer="test", requested_by="test"))
        events = await wait_events(settings, {"bench.planned", "bench.completed"}, run_id=run_id, timeout_s=120)
    assert len(events["bench.completed"]["results"]) == 12


async def test_the_operator_bench_command_is_run_and_its_result_accepted(settings, tmp_path):
    """commands.bench as an argv: specdec runs it against the served cell and keeps its result."""
    run_id = "toy-20261130-070707-abcdef"
    script = tmp_path / "operator_bench.py"
    script.write_text(
        "import json, sys, urllib.request\n"
        "base, out, conc = sys.argv[1], sys.argv[2], int(sys.argv[3])\n"
        "body = json.dumps({'model': 'm', 'prompt': 'hello', 'max_tokens': 6, 'stream': True}).encode()\n"
        "req = urllib.request.Request(base + '/v1/completions', data=body,"
        " headers={'content-type': 'application/json'})\n"
        "urllib.request.urlopen(req).read()\n"
        "json.dump({'completed': 1, 'failed': 0, 'max_concurrency': conc, 'median_ttft_ms': 5.0,\n"
        "           'median_tpot_ms': 1.0, 'mean_tpot_ms': 1.0, 'duration': 0.1}, open(out, 'w'))\n"
    )
    data = campaign(acknowledged=True, pre_approve=("bench",)).model_dump(by_alias=True)
    # It reads its first three arguments; the load it is declared to carry (submit refuses a template that drops
    # it) follows, unread.
    data["commands"]["bench"] = {"argv": [sys.executable, str(script), "{base_url}", "{result_path}", "{concurrency}",
                                          "{prompts_path}", "--num-prompts", "{num_prompts}", "--num-warmups",
                                          "{warmup_requests}", "--max-output-tokens", "{max_output_tokens}",
                                          "{ignore_eos_flag}"]}
    data["matrix"]["cells"] = data["matrix"]["cells"][:2]
    bundle = BundleStore(settings.bundle_root)
    bundle.write_json(run_id, "campaign.json", Campaign.model_validate(data))
    async with bench_runner(settings) as service:
        await service.bus.publish(BenchRequested(run_id=run_id, producer="test", requested_by="test"))
        done = (await wait_events(settings, {"bench.completed"}, run_id=run_id, timeout_s=120))["bench.completed"]
    assert done["failed_cells"] == {} and len(done["results"]) == 12
    result = orjson.loads(bundle.read_bytes(run_id, "bench/ngram-k3/trial-0/result-c2.json"))
    assert result["median_ttft_ms"] == 5.0 and result["identity"]["concurrency"] == 2
    assert result["spec_decode"]["num_drafts"] > 0


async def test_a_kubernetes_plan_without_kubectl_fails_before_any_launch(settings, tmp_path, monkeypatch):
    """The plan (Pods, kubectl argv) is stored; executing it needs kubectl, checked first."""
    run_id = "toy-20261130-080808-abcdef"
    data = campaign(acknowledged=True, pre_approve=("bench",)).model_dump(by_alias=True)
    data["capacity"]["scheduler"] = "kubernetes"
    data["capacity"]["selectors"] = {"image": "registry.example/vllm:0.11"}
    for cell in data["matrix"]["cells"]:
        cell["node"] = "gpu-1"  # no capacity.selected in this run: each cell names its node
    bundle = BundleStore(settings.bundle_root)
    bundle.write_json(run_id, "campaign.json", Campaign.model_validate(data))
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without kubectl
    async with bench_runner(settings) as service:
        await service.bus.publish(BenchRequested(run_id=run_id, producer="test", requested_by="test"))
        events = await wait_events(settings, {"bench.completed", "bench.failed"}, run_id=run_id, timeout_s=60)
    assert events["bench.failed"]["error_type"] == "KubectlMissing"
    assert "kubectl is not on the bench-runner's PATH" in events["bench.failed"]["reason"]
    plan = bundle.read_json(run_id, "bench/plan.json")
    assert plan["executor"] == "kubernetes"
    assert plan["launches"][0]["kubernetes"]["manifest"]["metadata"]["labels"]["experiment"] == run_id
    assert not list((bundle.run_dir(run_id) / "bench").glob("*/launch-*"))


async def test_on_a_scheduler_without_a_selected_node_a_cell_without_one_is_refused_at_planning(settings):
    run_id = "toy-20261130-090909-abcdef"
    data = campaign(acknowledged=True, pre_approve=("bench",)).model_dump(by_alias=True)
    data["capacity"]["scheduler"] = "slurm"
    bundle = BundleStore(settings.bundle_root)
    bundle.write_json(run_id, "campaign.json", Campaign.model_validate(data))
    async with bench_runner(settings) as service:
        await service.bus.publish(BenchRequested(run_id=run_id, producer="test", requested_by="test"))
        events = await wait_events(settings, {"bench.completed", "bench.failed"}, run_id=run_id, timeout_s=60)
    failed = events["bench.failed"]
    assert failed["error_type"] == "NoCapacity" and f"specdec request capacity {run_id}" in failed["reason"]
    assert not (bundle.run_dir(run_id) / "bench/plan.json").exists()


async def test_every_listed_shape_is_sent_and_an_exploratory_matrix_is_a_draft_with_three_trials(settings):
    """traffic.shapes [short, medium]: prompts.jsonl takes them in turn, every trial's identity
    says 'short+medium'; exploratory with 3 trials per cell still marks bench.completed DRAFT."""
    run_id = "toy-20261130-101010-abcdef"
    data = campaign(acknowledged=True, pre_approve=("bench",)).model_dump(by_alias=True)
    data["traffic"] = {"shapes": ["short", "medium"]}
    data["matrix"]["exploratory"] = True
    data["matrix"]["load"]["num_prompts"] = 5
    data["matrix"]["cells"] = data["matrix"]["cells"][:2]
    for cell in data["matrix"]["cells"]:
        cell.update(concurrency=[1], workload_shape=None)
    bundle = BundleStore(settings.bundle_root)
    bundle.write_json(run_id, "campaign.json", Campaign.model_validate(data))
    async with bench_runner(settings) as service:
        await service.bus.publish(BenchRequested(run_id=run_id, producer="test", requested_by="test"))
        done = (await wait_events(settings, {"bench.completed"}, run_id=run_id, timeout_s=120))["bench.completed"]
    assert done["failed_cells"] == {} and len(done["results"]) == 6 and done["draft"] is True
    prompts = [orjson.loads(line) for line in bundle.read_bytes(run_id, "bench/prompts.jsonl").splitlines()]
    assert [p["prompt_id"] for p in prompts] == ["short-0", "medium-0", "short-1", "medium-1", "short-2"]
    plan = bundle.read_json(run_id, "bench/plan.json")
    assert plan["draft"] is True and plan["prompts"]["workload_shape"] == "short+medium"
    assert [(s["name"], s["prompts"]) for s in plan["prompts"]["shapes"]] == [("short", 3), ("medium", 2)]
    for ref in done["results"]:
        result = orjson.loads(bundle.resolve(ref["uri"]).read_bytes())
        assert result["identity"]["workload_shape"] == "short+medium" and result["completed"] == 5
