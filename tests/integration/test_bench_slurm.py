"""The bench-runner's Slurm executor against a REAL single-node Slurm
(infra/bin/ensure-slurm), with the stand-in server as the cells' serve command:
each launch is a labelled batch job that picks its own port, the runner measures
it through the endpoint file, and nothing labelled is left in the queue."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from contracts.campaign import Campaign, Matrix
from contracts.events import BenchRequested, BenchTrialCompleted
from services.bench import app
from services.bench.executors.slurm import SlurmExecutor
from services.bench.loadgen.prompts import ChatTurn, Prompt
from services.bench.planning.builder import build_plan
from services.bench.run import BenchRun
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.service import bootstrap
from services.runtime.main import resources_for
from tests.support.cli_runs import ensure_slurm
from tests.support.services import wait_events

ROOT = Path(__file__).resolve().parents[2]
# The stand-in logs vLLM's start-up config for what it is given; the bench-runner reads it back.
FAKE = [sys.executable, "-m", "tests.support.fake_vllm", "--port", "{port}", "--model", "{model}",
        "--max-model-len", "{max_model_len}", "{enforce_eager_flag}"]
# Commands that never serve; they carry the declared fields as a server's would (submit and the plan refuse a
# template that drops one), which `python -c` hands to the script as arguments it never reads.
_CARRIED = ["{port}", "--max-model-len", "{max_model_len}", "{enforce_eager_flag}"]
DYING = [sys.executable, "-c", "import sys; print('cannot load model: boom', flush=True); sys.exit(3)", *_CARRIED]
KILLED = [sys.executable, "-c", "import os; print('loading, then killed', flush=True); os.kill(os.getpid(), 9)",
          *_CARRIED, "--speculative-config", "{speculative_config_json}"]
SPEC = {"method": "ngram", "num_speculative_tokens": 3}


@pytest.fixture(scope="session")
def slurm_env() -> dict[str, str]:
    return ensure_slurm()


@pytest.fixture
def node(slurm_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> str:
    for key, value in slurm_env.items():
        monkeypatch.setenv(key, value)
    sinfo = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, check=True)
    return sinfo.stdout.split()[0]


def labelled_jobs(run_id: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i|%j|%k"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if f"specdec-{run_id}" in line or f"experiment={run_id}" in line]


def campaign(cells: list[dict], node: str) -> Campaign:
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["traffic"] = {"shapes": ["short"]}
    data["commands"].pop("train")
    data["source_revisions"].pop("trainer")  # refused with shapes: nothing is trained
    data["capacity"].update(scheduler="slurm", selectors={"partition": "debug"})
    data["acknowledgements"]["i_understand_this_mutates_cluster"] = True
    data["review"] = {"pre_approve": ["bench"]}  # shapes only: nothing is trained
    data["matrix"]["exploratory"] = True
    data["matrix"]["load"] = {"num_prompts": 4, "warmup_requests": 1, "max_output_tokens": 9}
    data["matrix"]["cells"] = [{"trials": 1, "concurrency": [2], "node": node, **cell} for cell in cells]
    return Campaign.model_validate(data)


async def test_a_campaign_on_slurm_is_measured_through_labelled_jobs(settings, node):
    run_id = "toy-20261130-090909-abcdef"
    bundle = BundleStore(settings.bundle_root)
    bundle.write_json(run_id, "campaign.json", campaign([
        {"cell_id": "standing", "role": "standing", "vllm_sweep": {"serve_cmd": FAKE}},
        {"cell_id": "ngram-k3", "role": "candidate", "serving": {"speculative": SPEC},
         "vllm_sweep": {"serve_cmd": [*FAKE, "--speculative-config", "{speculative_config_json}"]}},
    ], node))

    async def idle(_: str) -> None:
        return None

    resources = resources_for(settings, bundle=bundle, bench_recheck=idle)
    service = bootstrap("bench-runner", app.routes(resources), settings=settings, resources=resources)
    await service.start()
    try:
        await service.bus.publish(BenchRequested(run_id=run_id, producer="test", requested_by="test"))
        done = (await wait_events(settings, {"bench.completed"}, run_id=run_id, timeout_s=45))["bench.completed"]
    finally:
        await service.stop(grace_s=1)
    assert done["failed_cells"] == {} and len(done["results"]) == 2

    plan = bundle.read_json(run_id, "bench/plan.json")
    job = plan["launches"][1]["slurm"]
    assert job["sbatch_argv"][:6] == ["sbatch", "--parsable", "--job-name", f"specdec-{run_id}",
                                      "--comment", f"experiment={run_id}"]
    # What was submitted is byte for byte what the approved plan shows.
    assert bundle.read_bytes(run_id, job["job_script_path"]).decode() == job["job_script"]
    launched = bundle.read_json(run_id, "bench/ngram-k3/launch-1/argv.json")
    assert launched["sbatch_argv"] == job["sbatch_argv"]
    endpoint = bundle.read_json(run_id, "bench/ngram-k3/launch-1/endpoint.json")
    assert endpoint["job_id"] == launched["job_id"]
    assert str(endpoint["port"]) in endpoint["argv"] and "{port}" not in endpoint["argv"]
    record = subprocess.run(["scontrol", "show", "job", "-o", launched["job_id"]],
                            capture_output=True, text=True).stdout
    if record:  # the controller still remembers the job (MinJobAge)
        assert f"Comment=experiment={run_id}" in record and f"NodeList={node}" in record

    result = orjson.loads(bundle.read_bytes(run_id, "bench/ngram-k3/trial-0/result-c2.json"))
    assert result["completed"] == 4 and result["identity"]["cell_id"] == "ngram-k3"
    assert result["spec_decode"]["num_drafts"] > 0 and len(result["spec_decode"]["accepted_per_position"]) == 3
    standing = orjson.loads(bundle.read_bytes(run_id, "bench/standing/trial-0/result-c2.json"))
    assert standing.get("spec_decode") is None
    # The job's log is in the bundle, hashed.
    logged = {ref.uri for ref in bundle.artifacts(run_id)}
    assert f"bundle://{run_id}/bench/ngram-k3/launch-1/server.log" in logged
    # The engine's config was read back from the job's log on the shared bundle, per launch.
    check = bundle.read_json(run_id, "bench/ngram-k3/launch-1/engine-config.json")
    assert all(c["ok"] for c in check["checks"]) and check["effective"]["speculative_method"] == "ngram"
    assert any("bench/ngram-k3/launch-1/server.log line" in s for s in check["effective"]["sources"])
    assert f"bundle://{run_id}/bench/standing/launch-0/engine-config.json" in logged
    assert labelled_jobs(run_id) == []


async def test_planning_alone_submits_nothing(settings, node):
    run_id = "toy-20261130-111111-abcdef"
    bundle = BundleStore(settings.bundle_root)
    data = campaign([{"cell_id": "standing", "role": "standing", "vllm_sweep": {"serve_cmd": FAKE}}], node)
    # Acknowledged, but no pre-approval policy: the plan waits for an approval of its hash.
    data = data.model_copy(update={"review": data.review.model_copy(update={"pre_approve": []})})
    bundle.write_json(run_id, "campaign.json", data)
    resources = resources_for(settings, bundle=bundle)
    service = bootstrap("bench-runner", app.routes(resources), settings=settings, resources=resources)
    await service.start()
    try:
        await service.bus.publish(BenchRequested(run_id=run_id, producer="test", requested_by="test"))
        await wait_events(settings, {"bench.planned"}, run_id=run_id, timeout_s=30)
    finally:
        await service.stop(grace_s=1)
    assert bundle.read_json(run_id, "bench/plan.json")["launches"][0]["slurm"]["sbatch_argv"][0] == "sbatch"
    assert labelled_jobs(run_id) == []
    assert not list((bundle.run_dir(run_id) / "bench").glob("*/launch-*"))


async def test_jobs_that_die_or_are_killed_at_start_fail_their_cells_with_the_log_tail(settings, node):
    run_id = "toy-20261130-101010-abcdef"
    bundle = BundleStore(settings.bundle_root)
    camp = campaign([
        {"cell_id": "standing", "role": "standing", "vllm_sweep": {"serve_cmd": DYING}},
        {"cell_id": "killed", "role": "candidate", "serving": {"speculative": SPEC},
         "vllm_sweep": {"serve_cmd": KILLED}},
    ], node)
    assert isinstance(camp.matrix, Matrix)
    plan = build_plan(camp, camp.matrix, run_id=run_id, default_node=node, training_output=None,
                      prompts={"source": "test", "count": 1}, readiness_timeout_s=30,
                      run_dir=str(bundle.run_dir(run_id).absolute()), cwd=str(ROOT))
    prompt = Prompt(prompt_id="p0", messages=[ChatTurn(role="user", content="hi")], text="hi", input_tokens=1,
                    max_output_tokens=4, ignore_eos=True)
    emitted: list[BenchTrialCompleted] = []

    async def emit(event: BenchTrialCompleted) -> None:
        emitted.append(event)

    async def idle(_: str) -> None:
        return None

    runner = BenchRun(plan, bundle, [prompt], emit=emit, recheck=idle, executor=SlurmExecutor(run_id, bundle),
                    event_factory=lambda **f: BenchTrialCompleted(run_id=run_id, producer="test", **f))
    outcome = await runner.execute()

    assert emitted == [] and outcome.results == []
    dying, killed = outcome.failed_cells["standing"], outcome.failed_cells["killed"]
    assert "ended before its server was ready" in dying and "exit code 3" in dying
    assert "cannot load model: boom" in dying, dying
    assert "ended before its server was ready" in killed and "signal 9" in killed and "loading, then killed" in killed
    assert labelled_jobs(run_id) == []
    assert os.path.exists(bundle.run_dir(run_id) / "bench/standing/launch-0/server.log")
