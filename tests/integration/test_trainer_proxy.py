"""The trainer-proxy through a real Redis: nothing runs before its plan is approved,
everything about the trainer lands in the bundle, and untrustworthy training stops
the campaign (non-finite loss, a hung trainer, a failed probe, a busy node)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

import orjson
import pytest
import redis.asyncio as aioredis

from contracts.envelope import ArtifactRef
from contracts.events import CapacitySelected, RunApproved, TrainingRequested
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.broker import decode_entry
from services.runtime.delivery.service import Service, bootstrap
from services.runtime.main import resources_for
from services.runtime.settings import RuntimeSettings
from services.shared.capacity.recheck import Recheck
from services.trainer_proxy import app
from tests.support.services import publish_approval, wait_events
from tests.unit.trainer_proxy.helpers import (
    COPY_TRAINER,
    PY,
    ROOT,
    build_tiny_models,
    campaign,
    corpus_bytes,
    profiled,
    seed_run,
    write_script,
)


def idle(bundle, camp, node, run_id) -> Recheck:
    return Recheck(idle=True, reasons=[], snapshot=None)


def busy(bundle, camp, node, run_id) -> Recheck:
    return Recheck(idle=False, reasons=[f"node {node}: busy with slurm job 9 'other' RUNNING"], snapshot=None)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_tiny_models(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def run_id() -> str:
    return f"tp-{uuid.uuid4().hex[:10]}"


@asynccontextmanager
async def proxy(settings: RuntimeSettings, recheck=idle) -> AsyncIterator[Service]:
    bundle = BundleStore(settings.bundle_root)
    resources = resources_for(settings, bundle=bundle, training_recheck=recheck)
    service = bootstrap(app.NAME, app.routes(resources), settings=settings, resources=resources)
    await service.start()
    try:
        yield service
    finally:
        await service.stop(grace_s=1.0)


def snapshot_ref(bundle: BundleStore, run_id: str) -> ArtifactRef:
    return bundle.write_json(run_id, "capacity/snapshot.json", {"node": "local-node"})


def selected(bundle: BundleStore, run_id: str, scheduler: str = "local", node: str = "local-node") -> CapacitySelected:
    return CapacitySelected(run_id=run_id, producer="test", scheduler=scheduler, node=node,
                            snapshot=snapshot_ref(bundle, run_id))


async def stream_events(settings: RuntimeSettings, schema: str, run_id: str) -> list[dict]:
    client = aioredis.Redis.from_url(settings.redis_url)
    try:
        stream = f"{settings.stream_prefix}.{schema}"
        # redis-py types replies for decode_responses too; this client's are bytes
        entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", await client.xrange(stream))
    finally:
        await client.aclose()
    events = [orjson.loads(decode_entry(fields)[0]) for _, fields in entries]
    return [event for event in events if event["run_id"] == run_id]


async def wait_consumed(settings: RuntimeSettings, schema: str, timeout_s: float = 20.0) -> None:
    """Until the trainer-proxy's group has read and acked every entry of the stream."""
    client = aioredis.Redis.from_url(settings.redis_url)
    stream = f"{settings.stream_prefix}.{schema}"
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            groups = {g["name"].decode(): g for g in await client.xinfo_groups(stream)}
            group = groups.get(app.NAME)
            if group and group["pending"] == 0 and group["lag"] == 0:
                return
            await asyncio.sleep(0.1)
    finally:
        await client.aclose()
    raise AssertionError(f"{app.NAME} did not consume {stream} within {timeout_s} s")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_nothing_runs_before_its_plan_is_approved_then_everything_is_captured(settings, models, run_id, tmp_path):
    """The campaign carries the acknowledgement but no pre-approval policy: it stops at its first plan."""
    bundle = BundleStore(settings.bundle_root)
    trainer = write_script(tmp_path / "trainer.py", COPY_TRAINER)
    argv = [PY, str(trainer), "--from", str(models["draft"]), "--out", "{output_dir}", "--corpus", "{corpus_train}",
            "--shell-test", "a;b $(touch {run_id}-pwned) `id`"]
    seed_run(bundle, run_id, campaign(train_argv=argv, target=str(models["target"]), acknowledged=True))
    run_dir = bundle.run_dir(run_id)
    output = run_dir / "training/output"
    async with proxy(settings) as service:
        await service.bus.publish(selected(bundle, run_id))
        events = await wait_events(settings, {"training.planned"}, run_id=run_id)
        plan_ref = events["training.planned"]["plan"]
        await asyncio.sleep(0.5)
        assert not output.exists(), "the trainer ran before any approval"
        assert await stream_events(settings, "training.started", run_id) == []

        wrong = hashlib.sha256(b"another plan").hexdigest()
        await publish_approval(
            settings, RunApproved(run_id=run_id, producer="test", i_understand_this_mutates_cluster=True,
                                  plan_sha256s=[wrong], approved_by="t")
        )
        await wait_consumed(settings, "run.approved")
        assert not output.exists(), "an approval of another hash ran the plan"
        assert await stream_events(settings, "training.started", run_id) == []

        await publish_approval(settings, RunApproved(
            run_id=run_id, producer="test", i_understand_this_mutates_cluster=True,
            plan_sha256s=[wrong, plan_ref["sha256"]], approved_by="t",
        ))
        events = await wait_events(settings, {"training.started", "training.completed"}, run_id=run_id, timeout_s=60)
    completed = events["training.completed"]
    assert "training.failed" not in events, events.get("training.failed")
    assert events["training.started"]["plan_sha256"] == plan_ref["sha256"]
    assert completed["checkpoint_dir"] == str(output.absolute())

    # The exact argv, passed literally (no shell), with the experiment label.
    plan = bundle.read_json(run_id, "training/plan.json")
    seen = json.loads((output / "trainer-argv.json").read_text())
    assert seen["argv"] == plan["launch"]["argv"][1:]  # sys.argv starts at the script
    assert seen["argv"][-1] == f"a;b $(touch {run_id}-pwned) `id`"
    assert seen["label"] == run_id
    assert not (ROOT / f"{run_id}-pwned").exists()
    assert bundle.read_json(run_id, "training/argv.json")["argv"] == plan["launch"]["argv"]

    # stdout, stderr, exit code, duration and every output hash are in the bundle.
    capture = bundle.read_json(run_id, "training/capture.json")
    assert capture["exit_code"] == 0 and capture["plan_sha256"] == plan_ref["sha256"]
    assert capture["launched_argv"] == plan["launch"]["argv"] and capture["duration_s"] > 0
    assert bundle.read_bytes(run_id, "training/stdout.log").count(b'"loss"') == 3
    assert bundle.read_bytes(run_id, "training/stderr.log") == b"trainer done\n"
    assert capture["losses"][0]["last_finite_loss"] == pytest.approx(2.0 / 3)
    manifest = bundle.read_json(run_id, "training/outputs.json")
    assert completed["output"]["sha256"] == bundle.ref(run_id, "training/outputs.json").sha256
    files = {entry["path"]: entry for entry in manifest["files"]}
    on_disk = sorted(p.relative_to(output).as_posix() for p in output.rglob("*") if p.is_file())
    assert sorted(files) == on_disk and "model.safetensors" in files and not manifest["partial"]
    for rel, entry in files.items():
        assert entry["sha256"] == sha(output / rel)
        assert bundle.ref(run_id, f"training/output/{rel}").sha256 == entry["sha256"]
    probes = bundle.read_json(run_id, "training/probes.json")
    assert probes["passed"]
    assert [c["name"] for c in probes["checks"]] == ["checkpoint_loads", "vocabulary_matches", "forward_pass"]
    assert bundle.read_json(run_id, "training/cleanup.json")["selector"] == f"experiment={run_id}"
    assert_draft_cost(bundle, run_id)

    # One approval runs a plan once: approving the same hash again starts nothing.
    async with proxy(settings) as service:
        await publish_approval(settings, RunApproved(
            run_id=run_id, producer="test", i_understand_this_mutates_cluster=True,
            plan_sha256s=[plan_ref["sha256"]], approved_by="t",
        ))
        await wait_consumed(settings, "run.approved")
    assert len(await stream_events(settings, "training.started", run_id)) == 1
    assert len(await stream_events(settings, "training.completed", run_id)) == 1


def assert_draft_cost(bundle: BundleStore, run_id: str) -> dict:
    """training/draft-cost.json is registered, and its numbers are positive and agree with each other."""
    cost = bundle.read_json(run_id, "training/draft-cost.json")  # read_json checks the recorded sha256
    assert cost["run_id"] == run_id and cost["dtype"] == "float32" and cost["threads"] >= 1
    assert cost["batch_prompts"] >= 1 and cost["batch_tokens"] >= cost["batch_prompts"] and cost["repetitions"] == 5
    assert cost["draft_ms_per_token"] > 0 and cost["target_ms_per_token"] > 0
    assert cost["relative_cost"] == cost["draft_ms_per_token"] / cost["target_ms_per_token"]
    assert cost["draft_parameters"] > 0 and cost["target_parameters"] > 0
    return cost


async def test_a_trainer_printing_loss_nan_stops_the_campaign(settings, models, run_id, tmp_path):
    bundle = BundleStore(settings.bundle_root)
    trainer = write_script(tmp_path / "nan.py", """
        import json, sys, time
        print(json.dumps({"step": 0, "loss": 1.5}), flush=True)
        print("step=1 loss=nan", flush=True)
        time.sleep(60)
    """)
    seed_run(bundle, run_id, campaign(train_argv=[PY, str(trainer)], target=str(models["target"]), pre_approved=True))
    started = time.monotonic()
    async with proxy(settings) as service:
        await service.bus.publish(selected(bundle, run_id))
        events = await wait_events(settings, {"training.planned", "training.started", "training.failed"},
                                   run_id=run_id, timeout_s=40)
    failed = events["training.failed"]
    assert failed["error_type"] == "NonFiniteLoss" and "loss=nan" in failed["reason"] and "line 2" in failed["reason"]
    assert time.monotonic() - started < 30, "the trainer should be stopped at the first NaN, not run on"
    capture = bundle.read_json(run_id, "training/capture.json")
    assert capture["stopped_for_loss"] and capture["exit_code"] is None
    assert ({ref["uri"].rsplit("/", 1)[-1] for ref in failed["artifacts"]}
            >= {"capture.json", "stdout.log", "outputs.json"})
    assert await stream_events(settings, "training.completed", run_id) == []

    # The campaign pre-approved the plan: an approval of it later runs nothing again.
    plan_sha = events["training.planned"]["plan"]["sha256"]
    async with proxy(settings) as service:
        await publish_approval(settings, RunApproved(
            run_id=run_id, producer="test", i_understand_this_mutates_cluster=True, plan_sha256s=[plan_sha],
            approved_by="t",
        ))
        await wait_consumed(settings, "run.approved")
    assert len(await stream_events(settings, "training.started", run_id)) == 1


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def test_a_hung_trainer_is_killed_with_its_children_and_partial_outputs_are_kept(
    settings, models, run_id, tmp_path
):
    bundle = BundleStore(settings.bundle_root)
    trainer = write_script(tmp_path / "hang.py", """
        import os, subprocess, sys, time
        out = sys.argv[1]
        os.makedirs(out, exist_ok=True)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        with open(os.path.join(out, "pids.txt"), "w") as fh:
            fh.write(f"{os.getpid()} {child.pid}")
        with open(os.path.join(out, "partial.bin"), "wb") as fh:
            fh.write(os.urandom(4096))
        print("loss=0.9", flush=True)
        time.sleep(300)
    """)
    seed_run(bundle, run_id, campaign(train_argv=[PY, str(trainer), "{output_dir}"], target=str(models["target"]),
                                      pre_approved=True, timeout_s=2.0))
    async with proxy(settings) as service:
        await service.bus.publish(selected(bundle, run_id))
        events = await wait_events(settings, {"training.failed"}, run_id=run_id, timeout_s=40)
    failed = events["training.failed"]
    assert failed["error_type"] == "TrainingTimeout" and "timeout_s (2 s)" in failed["reason"]
    output = bundle.run_dir(run_id) / "training/output"
    parent, child = (int(p) for p in (output / "pids.txt").read_text().split())
    assert not _alive(parent) and not _alive(child), "the trainer and its child must both be killed"
    manifest = bundle.read_json(run_id, "training/outputs.json")
    assert manifest["partial"] is True
    files = {entry["path"]: entry["sha256"] for entry in manifest["files"]}
    assert files["partial.bin"] == sha(output / "partial.bin")
    assert bundle.ref(run_id, "training/output/partial.bin").sha256 == files["partial.bin"]
    capture = bundle.read_json(run_id, "training/capture.json")
    assert capture["timed_out"] and 2.0 <= capture["duration_s"] < 15


async def test_a_checkpoint_with_a_mismatched_vocabulary_fails_the_probe(settings, models, run_id, tmp_path):
    bundle = BundleStore(settings.bundle_root)
    trainer = write_script(tmp_path / "trainer.py", COPY_TRAINER)
    argv = [PY, str(trainer), "--from", str(models["draft-vocab120"]), "--out", "{output_dir}",
            "--corpus", "{corpus_train}"]
    operator_probe = [PY, "-c", "import os, sys; sys.exit(0 if os.path.isdir(sys.argv[1]) else 5)", "{training.output}"]
    seed_run(bundle, run_id, campaign(train_argv=argv, target=str(models["target"]), pre_approved=True,
                                      probe=operator_probe))
    async with proxy(settings) as service:
        await service.bus.publish(selected(bundle, run_id))
        events = await wait_events(settings, {"training.failed"}, run_id=run_id, timeout_s=60)
    failed = events["training.failed"]
    assert failed["error_type"] == "ProbeFailed"
    assert "vocabulary_matches" in failed["reason"] and "120" in failed["reason"]
    report = bundle.read_json(run_id, "training/probes.json")
    by_name = {c["name"]: c["passed"] for c in report["checks"]}
    assert by_name == {"checkpoint_loads": True, "vocabulary_matches": False, "forward_pass": False, "operator": True}
    assert report["operator"]["exit_code"] == 0
    assert not (bundle.run_dir(run_id) / "training/draft-cost.json").exists(), (
        "a draft that failed its probes was timed")


async def test_a_node_that_is_no_longer_idle_starts_nothing(settings, models, run_id, tmp_path):
    bundle = BundleStore(settings.bundle_root)
    marker = tmp_path / "ran"
    argv = [PY, "-c", "import sys; open(sys.argv[1], 'w').close()", str(marker)]
    seed_run(bundle, run_id, campaign(train_argv=argv, target=str(models["target"]), pre_approved=True))
    async with proxy(settings, recheck=busy) as service:
        await service.bus.publish(selected(bundle, run_id))
        events = await wait_events(settings, {"training.failed"}, run_id=run_id)
    assert events["training.failed"]["error_type"] == "NodeBusy"
    assert "busy with slurm job 9" in events["training.failed"]["reason"]
    assert not marker.exists()
    assert not (bundle.run_dir(run_id) / "training/argv.json").exists()


async def test_an_argv_that_cannot_be_executed_fails_with_the_reason(settings, models, run_id, tmp_path):
    bundle = BundleStore(settings.bundle_root)
    missing = str(tmp_path / "no-such-trainer")
    seed_run(bundle, run_id, campaign(train_argv=[missing, "{output_dir}"], target=str(models["target"]),
                                      pre_approved=True))
    async with proxy(settings) as service:
        await service.bus.publish(selected(bundle, run_id))
        events = await wait_events(settings, {"training.failed"}, run_id=run_id)
    failed = events["training.failed"]
    assert failed["error_type"] == "ExecutorFailed" and missing in failed["reason"]
    capture = bundle.read_json(run_id, "training/capture.json")
    assert capture["launch_error"] and capture["exit_code"] is None and capture["launched_argv"][0] == missing


async def test_a_shapes_only_campaign_records_training_as_skipped(settings, run_id):
    bundle = BundleStore(settings.bundle_root)
    seed_run(bundle, run_id, campaign(train_argv=[PY, "-c", "raise SystemExit(1)"], shapes=True))
    async with proxy(settings) as service:
        await service.bus.publish(selected(bundle, run_id))
        events = await wait_events(settings, {"training.completed"}, run_id=run_id)
    completed = events["training.completed"]
    assert "shapes-only" in completed["skipped_reason"] and completed["output"] is None
    assert await stream_events(settings, "training.planned", run_id) == []
    assert not (bundle.run_dir(run_id) / "training/plan.json").exists()


async def test_a_training_request_without_a_selected_node_fails_with_what_to_do(settings, run_id):
    bundle = BundleStore(settings.bundle_root)
    seed_run(bundle, run_id, campaign(train_argv=[PY, "-c", "pass"]))
    async with proxy(settings) as service:
        await service.bus.publish(TrainingRequested(run_id=run_id, producer="test", requested_by="test"))
        events = await wait_events(settings, {"training.planned", "training.failed"}, run_id=run_id)
    assert "training.planned" not in events
    assert events["training.failed"]["error_type"] == "NoCapacity"
    assert f"specdec request capacity {run_id}" in events["training.failed"]["reason"]

    # Once the journal holds capacity.selected, a request plans on that node (and waits).
    capacity = selected(bundle, run_id, node="journal-node")
    bundle.append_event(run_id, capacity.event_id, capacity.to_json())
    async with proxy(settings) as service:
        await service.bus.publish(TrainingRequested(run_id=run_id, producer="test", requested_by="test"))
        events = await wait_events(settings, {"training.planned"}, run_id=run_id)
    assert events["training.planned"]["node"] == "journal-node"
    assert bundle.read_json(run_id, "training/plan.json")["node"] == "journal-node"


async def test_a_requested_corpus_of_other_traffic_fails_with_both_hashes(settings, run_id):
    """`specdec request training RUN --input corpus=bundle://OTHER/corpus/CORPUS.jsonl` with OTHER's
    corpus sampled from other traffic: refused before anything is planned; this run's own corpus plans."""
    bundle = BundleStore(settings.bundle_root)
    other = f"tp-{uuid.uuid4().hex[:10]}"
    mine, theirs = profiled(), profiled(traffic_lines=40)
    seed_run(bundle, run_id, campaign(train_argv=[PY, "-c", "pass"]), profile=mine)
    seed_run(bundle, other, campaign(train_argv=[PY, "-c", "pass"]), profile=theirs)
    capacity = selected(bundle, run_id)
    bundle.append_event(run_id, capacity.event_id, capacity.to_json())
    foreign = bundle.ref(other, "corpus/CORPUS.jsonl")
    async with proxy(settings) as service:
        await service.bus.publish(TrainingRequested(run_id=run_id, producer="test", requested_by="test",
                                                    inputs={"corpus": foreign}))
        events = await wait_events(settings, {"training.planned", "training.failed"}, run_id=run_id)
    assert "training.planned" not in events
    failed = events["training.failed"]
    assert failed["error_type"] == "CorpusMismatch"
    manifest = bundle.read_json(other, "corpus/CORPUS.jsonl.manifest.json")
    my_profile = bundle.ref(run_id, "profile/PROFILE.json").sha256
    my_traffic = bundle.read_json(run_id, "profile/PROFILE.json")["input"]["sha256"]
    for digest in (manifest["profile_sha256"], my_profile, manifest["traffic_sha256"], my_traffic):
        assert digest in failed["reason"]
    assert not (bundle.run_dir(run_id) / "training/plan.json").exists()


# --- Slurm ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def slurm_env() -> dict[str, str]:
    script = ROOT / "infra/bin/ensure-slurm"
    if not script.exists():
        pytest.skip("infra/bin/ensure-slurm is not in this tree")
    done = subprocess.run([str(script)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.skip(f"no single-node Slurm here: {done.stderr.strip()[-300:]}")
    return dict(line.split("=", 1) for line in done.stdout.split() if "=" in line)


async def test_the_slurm_path_runs_a_labelled_batch_job(settings, models, run_id, tmp_path, *, slurm_env, monkeypatch):
    for key, value in slurm_env.items():
        monkeypatch.setenv(key, value)
    sinfo = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, check=True)
    node = sinfo.stdout.split()[0]
    bundle = BundleStore(settings.bundle_root)
    trainer = write_script(tmp_path / "trainer.py", COPY_TRAINER)
    argv = [PY, str(trainer), "--from", str(models["draft"]), "--out", "{output_dir}", "--corpus", "{corpus_train}"]
    seed_run(bundle, run_id, campaign(train_argv=argv, target=str(models["target"]), scheduler="slurm",
                                      pre_approved=True))
    async with proxy(settings) as service:
        await service.bus.publish(selected(bundle, run_id, scheduler="slurm", node=node))
        events = await wait_events(settings, {"training.started", "training.completed"}, run_id=run_id, timeout_s=90)
    assert "training.failed" not in events, events.get("training.failed")
    capture = bundle.read_json(run_id, "training/capture.json")
    job_id = events["training.started"]["handle"]
    assert capture["handle"] == job_id and capture["exit_code"] == 0
    assert f"JobName=specdec-{run_id}" in capture["scheduler_record"]
    assert f"Comment=experiment={run_id}" in capture["scheduler_record"]
    assert f"NodeList={node}" in capture["scheduler_record"]
    assert capture["launched_argv"][0] == "sbatch"
    assert bundle.read_bytes(run_id, "training/stdout.log").count(b'"loss"') == 3
    assert json.loads((bundle.run_dir(run_id) / "training/output/trainer-argv.json").read_text())["label"] == run_id
    assert bundle.read_json(run_id, "training/probes.json")["passed"]
    assert os.environ["SLURM_CONF"] == slurm_env["SLURM_CONF"]


# --- draft reuse by training input key ------------------------------------------------------


COUNTING_TRAINER = COPY_TRAINER + """
    from pathlib import Path
    with open(Path(__file__).with_suffix(".launches"), "a") as fh:
        fh.write(os.environ["SPECDEC_EXPERIMENT"] + "\\n")
"""


def launches(trainer: Path) -> list[str]:
    counter = trainer.with_suffix(".launches")
    return counter.read_text().split() if counter.exists() else []


async def first_of(settings: RuntimeSettings, schema: str, run_id: str, timeout_s: float = 60.0) -> dict:
    """The run's first `schema` event; fails at once with the reason on training.failed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        failed = await stream_events(settings, "training.failed", run_id)
        assert not failed, failed[0]["reason"]
        found = await stream_events(settings, schema, run_id)
        if found:
            return found[0]
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {schema} for {run_id} within {timeout_s} s")


async def _train(settings, service, bundle: BundleStore, run_id: str, *, camp, corpus: bytes | None = None) -> dict:
    seed_run(bundle, run_id, camp, corpus=corpus)
    await service.bus.publish(selected(bundle, run_id))
    return await first_of(settings, "training.completed", run_id)


async def test_identical_inputs_reuse_the_earlier_draft_and_anything_else_trains_again(settings, models, tmp_path):
    bundle = BundleStore(settings.bundle_root)
    trainer = write_script(tmp_path / "trainer.py", COUNTING_TRAINER)
    argv = [PY, str(trainer), "--from", str(models["draft"]), "--out", "{output_dir}", "--corpus", "{corpus_train}"]

    def camp(**kw):
        return campaign(train_argv=argv, target=str(models["target"]), trainer_revision="trainer@1", **kw)

    first, second, off, other_corpus, after_tamper = (f"tp-{uuid.uuid4().hex[:10]}" for _ in range(5))
    async with proxy(settings) as service:
        done = await _train(settings, service, bundle, first, camp=camp(pre_approved=True))
        assert done["reused_from"] is None and launches(trainer) == [first]
        key = bundle.read_json(first, "training/input-key.json")
        assert key["key"] == bundle.read_json(first, "training/plan.json")["input_key"]["key"]
        assert key["reused_from"] is None and key["output"] == done["output"]

        # Same inputs, another run: the plan (what the operator approves) names the earlier run.
        seed_run(bundle, second, camp())
        await service.bus.publish(selected(bundle, second))
        planned = await first_of(settings, "training.planned", second)
        plan = bundle.read_json(second, "training/plan.json")
        assert plan["launch"] is None and plan["reuse"]["from_run"] == first
        assert plan["reuse"]["key"] == key["key"] and plan["reuse"]["manifest"]["sha256"] == done["output"]["sha256"]
        assert f"reused: run {first}" in plan["reuse_note"]
        await publish_approval(settings, RunApproved(run_id=second, producer="test",
                                                     i_understand_this_mutates_cluster=True,
                                                     plan_sha256s=[planned["plan"]["sha256"]], approved_by="t"))
        reused = await first_of(settings, "training.completed", second)
        assert reused["reused_from"] == first and launches(trainer) == [first], "a reused draft launched the trainer"
        assert await stream_events(settings, "training.started", second) == []
        copy = bundle.run_dir(second) / "training/output"
        assert reused["checkpoint_dir"] == str(copy.absolute())
        source = bundle.run_dir(first) / "training/output"
        manifest = bundle.read_json(second, "training/outputs.json")
        assert manifest["reused_from"] == first
        assert reused["output"]["sha256"] == bundle.ref(second, "training/outputs.json").sha256
        assert {f["path"]: f["sha256"] for f in manifest["files"]} == {
            f["path"]: f["sha256"] for f in bundle.read_json(first, "training/outputs.json")["files"]}
        assert (copy / "model.safetensors").read_bytes() == (source / "model.safetensors").read_bytes()
        record = bundle.read_json(second, "training/reuse.json")
        assert record["reused_from"] == first and record["plan_sha256"] == planned["plan"]["sha256"]
        assert record["duration_s"] == reused["duration_s"]
        assert bundle.read_json(second, "training/input-key.json")["reused_from"] == first
        # The reused draft is timed again, in this run, not copied from the first run's record.
        assert_draft_cost(bundle, second)

        # Reuse turned off: it trains again, though an identical draft exists.
        done = await _train(settings, service, bundle, off, camp=camp(pre_approved=True, reuse=False))
        assert done["reused_from"] is None and launches(trainer) == [first, off]
        assert "commands.train.reuse is false" in bundle.read_json(off, "training/plan.json")["reuse_note"]

        # Another corpus (one train record fewer): another key, so it trains.
        done = await _train(settings, service, bundle, other_corpus, camp=camp(pre_approved=True),
                            corpus=corpus_bytes(train=5))
        assert done["reused_from"] is None and launches(trainer) == [first, off, other_corpus]
        assert bundle.read_json(other_corpus, "training/input-key.json")["key"] != key["key"]

        # Every draft with this key tampered: none is reused, and the plan says why.
        for run_id in (first, second, off):
            with open(bundle.run_dir(run_id) / "training/output/model.safetensors", "r+b") as fh:
                fh.write(b"\xff\xff")
        done = await _train(settings, service, bundle, after_tamper, camp=camp(pre_approved=True))
        assert done["reused_from"] is None and launches(trainer)[-1] == after_tamper and len(launches(trainer)) == 4
        note = bundle.read_json(after_tamper, "training/plan.json")["reuse_note"]
        assert all(f"run {r}: its draft file model.safetensors changed" in note for r in (first, second, off))


async def test_a_file_named_in_the_argv_that_changed_before_a_second_trigger_names_the_input_key(
    settings, models, run_id, tmp_path
):
    bundle = BundleStore(settings.bundle_root)
    notes = tmp_path / "notes.txt"
    notes.write_text("first")
    argv = [PY, "-c", "pass", str(notes), "{output_dir}"]
    seed_run(bundle, run_id, campaign(train_argv=argv, target=str(models["target"])))
    async with proxy(settings) as service:
        await service.bus.publish(selected(bundle, run_id))
        await wait_events(settings, {"training.planned"}, run_id=run_id)
        notes.write_text("rewritten by something else")
        await service.bus.publish(selected(bundle, run_id))
        events = await wait_events(settings, {"training.failed"}, run_id=run_id)
    failed = events["training.failed"]
    assert failed["error_type"] == "PlanConflict"
    assert "plan fields that differ: input_key" in failed["reason"]
    assert "must not be named in commands.train.argv" in failed["reason"]


async def test_a_redelivered_trigger_keeps_its_plan_when_another_run_completed_meanwhile(settings, models, tmp_path):
    bundle = BundleStore(settings.bundle_root)
    trainer = write_script(tmp_path / "trainer.py", COUNTING_TRAINER)
    argv = [PY, str(trainer), "--from", str(models["draft"]), "--out", "{output_dir}", "--corpus", "{corpus_train}"]

    def camp(**kw):
        return campaign(train_argv=argv, target=str(models["target"]), trainer_revision="trainer@1", **kw)

    waiting, other = (f"tp-{uuid.uuid4().hex[:10]}" for _ in range(2))
    async with proxy(settings) as service:
        # Planned while no identical draft exists: it will train, once approved.
        seed_run(bundle, waiting, camp())
        await service.bus.publish(selected(bundle, waiting))
        await first_of(settings, "training.planned", waiting)
        stored = bundle.ref(waiting, "training/plan.json").sha256
        # Another run with the same inputs completes meanwhile.
        done = await _train(settings, service, bundle, other, camp=camp(pre_approved=True))
        assert done["reused_from"] is None
        # The waiting run's trigger comes again: its plan stands, nothing fails.
        await service.bus.publish(selected(bundle, waiting))
        await wait_consumed(settings, "capacity.selected")
    assert await stream_events(settings, "training.failed", waiting) == []
    assert bundle.ref(waiting, "training/plan.json").sha256 == stored
    assert bundle.read_json(waiting, "training/plan.json")["reuse"] is None
