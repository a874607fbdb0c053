"""`capacity.selectors.gres` end to end on a REAL single-node Slurm whose node has a
generic resource of its own (infra/bin/ensure-slurm: `GresTypes=specdec`,
`Gres=specdec:4`), through a real Redis and the real services:

- the capacity step selects the node for `gres: specdec:1` and refuses it, naming
  the resource, for more than the node has or for a resource it lacks;
- the bench-runner's serving job carries `--gres specdec:1`, passes the pre-launch
  re-check, and Slurm really allocates the resource to it (the stand-in server,
  not vLLM, reads its own allocation from inside the job);
- the trainer-proxy's batch job carries the same `--gres` and is scheduled with it.

Only jobs of these tests' own run IDs are cancelled, by label.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, cast

import orjson
import pytest
import redis.asyncio as aioredis
import yaml

from contracts.campaign import Campaign, CapacitySpec
from contracts.events import BenchRequested, CapacityRequested, CapacitySelected
from services.bench import app as bench_app
from services.capacity import app as capacity_app
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.broker import decode_entry
from services.runtime.delivery.service import bootstrap
from services.runtime.main import resources_for
from services.runtime.settings import RuntimeSettings
from services.trainer_proxy import app as trainer_app

ROOT = Path(__file__).resolve().parents[2]
GRES = "specdec:1"
IDLE = [sys.executable, "-c", "import sys; sys.exit(0)", "{node}"]
# The stand-in server, started through a wrapper that first prints the job's own record as
# Slurm sees it from inside the running job (JOB_GRES=... is what Slurm allocated to it).
SHOW_ALLOCATION = (
    "import os, subprocess, sys; "
    "job = os.environ['SLURM_JOB_ID']; "
    "record = subprocess.run(['scontrol', 'show', 'job', '-d', '-o', job], capture_output=True, text=True).stdout; "
    "print('allocation seen inside job ' + job + ': ' + record.strip(), flush=True); "
    "os.execv(sys.executable, [sys.executable, '-m', 'tests.support.fake_vllm', *sys.argv[1:]])"
)
# Its flags are test_bench_slurm.py's: the stand-in logs vLLM's start-up config for them, read back.
SERVE = [sys.executable, "-c", SHOW_ALLOCATION, "--port", "{port}", "--model", "{model}",
         "--max-model-len", "{max_model_len}", "{enforce_eager_flag}"]


@pytest.fixture(scope="session")
def slurm_env() -> dict[str, str]:
    done = subprocess.run([str(ROOT / "infra/bin/ensure-slurm")], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        pytest.fail(f"infra/bin/ensure-slurm exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return dict(line.split("=", 1) for line in done.stdout.split() if "=" in line)


@pytest.fixture
def node(slurm_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> str:
    # The services' own runners inherit SLURM_CONF, as a deployed service's would.
    for key, value in slurm_env.items():
        monkeypatch.setenv(key, value)
    listed = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%G"], capture_output=True, text=True, check=True).stdout
    name, gres = listed.split()[0].split("|")
    assert gres.startswith("specdec:"), f"ensure-slurm gave the node no specdec generic resource (sinfo %G: {gres})"
    return name


def run_id(tag: str) -> str:
    return f"gres-{tag}-{uuid.uuid4().hex[:8]}"


def labelled_jobs(run: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i|%j|%k"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if f"specdec-{run}" in line or f"experiment={run}" in line]


def slurm_campaign(selectors: dict[str, str], node: str | None = None) -> Campaign:
    """Shapes only, one standing cell served by the stand-in (on `node` when given)."""
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["traffic"] = {"shapes": ["short"]}
    data["commands"].pop("train")
    data["source_revisions"].pop("trainer")  # refused with shapes: nothing is trained
    data["capacity"] = {"scheduler": "slurm", "selectors": selectors, "idle_check": IDLE}
    data["acknowledgements"]["i_understand_this_mutates_cluster"] = True
    data["review"] = {"pre_approve": ["bench"]}  # shapes only: nothing is trained
    data["matrix"]["exploratory"] = True
    data["matrix"]["load"] = {"num_prompts": 2, "warmup_requests": 1, "max_output_tokens": 6}
    cell = {"cell_id": "standing", "role": "standing", "trials": 1, "concurrency": [1],
            "vllm_sweep": {"serve_cmd": SERVE}}
    data["matrix"]["cells"] = [{**cell, "node": node} if node else cell]
    return Campaign.model_validate(data)


async def capacity_outcome(settings: RuntimeSettings, camp: Campaign, run: str) -> tuple[str, dict[str, Any]]:
    bundle = BundleStore(settings.bundle_root)
    bundle.write_json(run, "campaign.json", camp)
    resources = resources_for(settings, bundle=bundle)
    service = bootstrap(capacity_app.NAME, capacity_app.routes(resources), settings=settings, resources=resources)
    await service.start()
    try:
        await service.bus.publish(CapacityRequested(run_id=run, producer="test", requested_by="test"))
        return await first_of(settings, run, ["capacity.selected", "capacity.unavailable", "capacity.failed"])
    finally:
        await service.stop(grace_s=1)


async def first_of(settings: RuntimeSettings, run: str, schemas: list[str], timeout_s: float = 30) -> tuple[str, dict]:
    """The first event of the run on any of `schemas`: (schema, event)."""
    client = aioredis.Redis.from_url(settings.redis_url)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for schema in schemas:
                stream = f"{settings.stream_prefix}.{schema}"
                # redis-py types replies for decode_responses too; this client's are bytes
                entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", await client.xrange(stream))
                for _, fields in entries:
                    event = orjson.loads(decode_entry(fields)[0])
                    if event.get("run_id") == run:
                        return schema, event
            await asyncio.sleep(0.1)
    finally:
        await client.aclose()
    raise AssertionError(f"none of {schemas} for {run} within {timeout_s} s")


async def test_the_capacity_step_selects_the_node_that_has_the_generic_resource(settings, node):
    run = run_id("cap")
    schema, event = await capacity_outcome(settings, slurm_campaign({"partition": "debug", "gres": GRES}), run)
    assert schema == "capacity.selected", event
    assert event["node"] == node and event["scheduler"] == "slurm"
    snapshot = BundleStore(settings.bundle_root).read_json(run, event["snapshot"]["uri"].removeprefix(f"bundle://{run}/"))
    assert snapshot["selectors"] == {"partition": "debug", "gres": GRES}
    assert snapshot["nodes"][0]["blockers"] == []


@pytest.mark.parametrize("gres", ["specdec:99", "gpu:1"])
async def test_a_node_without_enough_of_the_resource_is_unavailable_naming_it(settings, node, gres):
    run = run_id("none")
    schema, event = await capacity_outcome(settings, slurm_campaign({"partition": "debug", "gres": gres}), run)
    assert schema == "capacity.unavailable", event
    (reason,) = event["reasons"]
    assert reason.startswith(f"node {node}: lacks generic resource {gres} (sinfo %G: specdec:"), reason
    assert "capacity.selectors.gres" in reason


async def test_an_unknown_selector_fails_the_capacity_step_naming_the_allowed_keys(settings, node):
    run = run_id("bad")
    schema, event = await capacity_outcome(settings, slurm_campaign({"gpus": "1"}), run)
    assert schema == "capacity.failed" and event["error_type"] == "CapacityConfigError"
    assert "['gpus'] mean nothing to scheduler slurm; allowed: partition, nodelist, gres" in event["reason"]


async def test_the_bench_serving_job_is_scheduled_with_its_generic_resource(settings, node):
    run = run_id("bench")
    bundle = BundleStore(settings.bundle_root)
    bundle.write_json(run, "campaign.json", slurm_campaign({"partition": "debug", "gres": GRES}, node=node))
    # No bench_recheck override: the real pre-launch re-check runs, gres included.
    resources = resources_for(settings, bundle=bundle)
    service = bootstrap("bench-runner", bench_app.routes(resources), settings=settings, resources=resources)
    await service.start()
    try:
        await service.bus.publish(BenchRequested(run_id=run, producer="test", requested_by="test"))
        schema, done = await first_of(settings, run, ["bench.completed", "bench.failed"], timeout_s=60)
    finally:
        await service.stop(grace_s=1)
    assert schema == "bench.completed", done.get("reason")
    assert done["failed_cells"] == {}, done["failed_cells"]

    job = bundle.read_json(run, "bench/plan.json")["launches"][0]["slurm"]
    argv = job["sbatch_argv"]
    assert argv[argv.index("--gres") + 1] == GRES and argv[argv.index("--partition") + 1] == "debug"
    launched = bundle.read_json(run, "bench/standing/launch-0/argv.json")
    assert launched["sbatch_argv"] == argv
    log = bundle.read_bytes(run, "bench/standing/launch-0/server.log").decode()
    inside = next(line for line in log.splitlines() if line.startswith("allocation seen inside job"))
    assert f"JobId={launched['job_id']}" in inside and "JobState=RUNNING" in inside
    assert f"JOB_GRES={GRES}" in inside, inside  # Slurm allocated the resource to the running server
    result = orjson.loads(bundle.read_bytes(run, "bench/standing/trial-0/result-c1.json"))
    assert result["completed"] == 2
    rechecks = sorted((bundle.run_dir(run) / "bench/capacity").rglob("snapshot.json"))
    assert rechecks and orjson.loads(rechecks[-1].read_bytes())["idle"] is True
    assert labelled_jobs(run) == []


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    from tests.unit.trainer_proxy.helpers import build_tiny_models

    return build_tiny_models(tmp_path_factory.mktemp("tiny"))


async def test_the_trainers_batch_job_carries_the_generic_resource(settings, node, tiny_models, tmp_path):
    from tests.unit.trainer_proxy.helpers import COPY_TRAINER, PY, campaign, seed_run, write_script

    run = run_id("train")
    bundle = BundleStore(settings.bundle_root)
    trainer = write_script(tmp_path / "trainer.py", COPY_TRAINER)
    argv = [PY, str(trainer), "--from", str(tiny_models["draft"]), "--out", "{output_dir}",
            "--corpus", "{corpus_train}"]
    camp = campaign(train_argv=argv, target=str(tiny_models["target"]), scheduler="slurm", pre_approved=True,
                    selectors={"partition": "debug", "gres": GRES})
    # The idle check the real re-check runs on the node (the example's `python` may not be on PATH).
    camp = camp.model_copy(update={"capacity": CapacitySpec(scheduler="slurm", selectors=camp.capacity.selectors,
                                                            idle_check=IDLE)})
    seed_run(bundle, run, camp)
    snapshot = bundle.write_json(run, "capacity/snapshot.json", {"node": node})
    # No training_recheck override: the real re-check judges the node, gres included.
    resources = resources_for(settings, bundle=bundle)
    service = bootstrap(trainer_app.NAME, trainer_app.routes(resources), settings=settings, resources=resources)
    await service.start()
    try:
        await service.bus.publish(CapacitySelected(run_id=run, producer="test", scheduler="slurm", node=node,
                                                   snapshot=snapshot))
        schema, done = await first_of(settings, run, ["training.completed", "training.failed"], timeout_s=90)
    finally:
        await service.stop(grace_s=1)
    assert schema == "training.completed", done.get("reason")
    plan = bundle.read_json(run, "training/plan.json")
    sbatch = plan["launch"]["sbatch_argv"]
    assert sbatch[sbatch.index("--gres") + 1] == GRES
    capture = bundle.read_json(run, "training/capture.json")
    assert capture["exit_code"] == 0 and capture["launched_argv"] == sbatch
    # Slurm's own record of the job: it was scheduled asking for the resource.
    assert f"TresPerNode=gres:{GRES}" in capture["scheduler_record"], capture["scheduler_record"]
    assert labelled_jobs(run) == []
