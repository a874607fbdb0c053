"""Execution stages without Redis: an interrupted attempt is captured, never re-run;
a cancelled step kills its trainer."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import orjson
import pytest
import structlog

from contracts.events import CapacitySelected
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.route import StepContext
from services.runtime.settings import RuntimeSettings
from services.shared.capacity.recheck import Recheck
from services.trainer_proxy.errors import TrainingStopped
from services.trainer_proxy.execution.capture import write_argv
from services.trainer_proxy.execution.execute import Approved, execute
from services.trainer_proxy.planning.staging import plan_training
from tests.unit.trainer_proxy.helpers import COPY_TRAINER, PY, build_tiny_models, campaign, seed_run, write_script

RUN = "toy-20261130-020202-abcdef"


class Bus:
    def __init__(self) -> None:
        self.events: list = []

    async def publish(self, event) -> None:
        self.events.append(event)


def _ctx(bus: Bus) -> StepContext:
    return StepContext(
        service="trainer-proxy", settings=RuntimeSettings(instance="unit"),
        bus=bus,  # type: ignore[arg-type]  # a stand-in that records what is published
        log=structlog.get_logger(),
    )


def _idle(bundle, camp, node, run_id) -> Recheck:
    return Recheck(idle=True, reasons=[], snapshot=None)


def _approved(tmp_path: Path, argv: list[str], **kw) -> tuple[BundleStore, Approved, CapacitySelected]:
    bundle = BundleStore(tmp_path / "bundles", fsync=False)
    camp = campaign(train_argv=argv, pre_approved=True, **kw)
    seed_run(bundle, RUN, camp)
    snapshot = bundle.write_json(RUN, "capacity/snapshot.json", {})
    trigger = CapacitySelected(run_id=RUN, producer="test", scheduler="local", node="n1", snapshot=snapshot)
    plan, ref = plan_training(bundle, camp, trigger)
    return bundle, Approved(plan=plan, ref=ref, campaign=camp), trigger


async def test_an_interrupted_launch_is_captured_as_partial_and_never_run_again(tmp_path):
    marker = tmp_path / "ran"
    bundle, approved, trigger = _approved(tmp_path,
                                          [PY, "-c", "import sys; open(sys.argv[1], 'w').close()", str(marker)])
    # An earlier delivery recorded its launch and left a partial output, then the service died.
    write_argv(bundle, approved.plan)
    output = Path(approved.plan.output_dir)
    output.mkdir(parents=True)
    (output / "step-100.bin").write_bytes(b"partial")
    bus = Bus()
    for _ in range(2):
        with pytest.raises(TrainingStopped) as stopped:
            await execute(bundle, approved, trigger, _ctx(bus), recheck=_idle)
        assert stopped.value.error_type == "TrainingInterrupted"
    assert not marker.exists() and bus.events == []
    manifest = bundle.read_json(RUN, "training/outputs.json")
    assert manifest["partial"] and [f["path"] for f in manifest["files"]] == ["step-100.bin"]
    assert bundle.read_json(RUN, "training/capture.json")["interrupted"] is True


async def test_a_capture_left_without_its_index_record_is_read_not_recaptured(tmp_path):
    # The delivery was killed after capture.json's file and before its record: the retry reads the
    # trainer's end as captured. Re-capturing it as interrupted wrote outputs.json again with
    # "partial": true and failed the run on the write-once conflict.
    trainer = write_script(tmp_path / "ok.py",
                           "import sys, pathlib; pathlib.Path(sys.argv[1], 'w.bin').write_bytes(b'w')")
    bundle, approved, trigger = _approved(tmp_path, [PY, str(trainer), "{output_dir}"])
    first = Bus()
    with pytest.raises(TrainingStopped):  # the probes refuse a one-byte draft; the capture is what counts here
        await execute(bundle, approved, trigger, _ctx(first), recheck=_idle)
    capture = bundle.run_dir(RUN) / "training/capture.json"
    record = next(p for p in (bundle.run_dir(RUN) / ".index").iterdir()
                  if orjson.loads(p.read_bytes())["path"] == "training/capture.json")
    record.unlink()
    second = Bus()
    with pytest.raises(TrainingStopped) as stopped:
        await execute(bundle, approved, trigger, _ctx(second), recheck=_idle)
    assert stopped.value.error_type == "ProbeFailed", stopped.value
    assert second.events == [], "the trainer ran again"
    assert bundle.read_json(RUN, "training/capture.json")["exit_code"] == 0 and capture.exists()
    assert bundle.read_json(RUN, "training/outputs.json")["partial"] is False


async def test_a_cancelled_step_kills_its_trainer(tmp_path):
    pid_file = tmp_path / "pid"
    trainer = write_script(tmp_path / "sleep.py", f"""
        import os, time
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(300)
    """)
    bundle, approved, trigger = _approved(tmp_path, [PY, str(trainer)])
    bus = Bus()
    task = asyncio.create_task(execute(bundle, approved, trigger, _ctx(bus), recheck=_idle))
    deadline = time.monotonic() + 20
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the trainer never started"
        await asyncio.sleep(0.05)
    pid = int(pid_file.read_text())
    assert [e.SCHEMA for e in bus.events] == ["training.started"] and bus.events[0].handle == str(pid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (not Path(f"/proc/{pid}").exists()
            or Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z")


async def test_a_draft_cost_that_cannot_be_measured_changes_nothing_else(tmp_path):
    models = build_tiny_models(tmp_path / "tiny")
    # The target's config and tokenizer are there (the probes read only those), its weights are not.
    target = tmp_path / "target-without-weights"
    shutil.copytree(models["target"], target, ignore=shutil.ignore_patterns("*.safetensors"))
    trainer = write_script(tmp_path / "trainer.py", COPY_TRAINER)
    argv = [PY, str(trainer), "--from", str(models["draft"]), "--out", "{output_dir}", "--corpus", "{corpus_train}"]
    bundle, approved, trigger = _approved(tmp_path, argv, target=str(target))
    completed = await execute(bundle, approved, trigger, _ctx(Bus()), recheck=_idle)
    assert completed.output is not None and completed.reused_from is None
    assert bundle.read_json(RUN, "training/probes.json")["passed"]
    assert not (bundle.run_dir(RUN) / "training/draft-cost.json").exists()
    assert bundle.read_json(RUN, "training/input-key.json")["run_id"] == RUN


# A trainer that saves like `speculators train --save-path P`: one folder per epoch below P.
EPOCH_TRAINER = """
    import json, shutil, sys
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    for epoch in range(3):
        shutil.copytree(args["--from"], f"{args['--out']}/{epoch}")
        print(json.dumps({"epoch": epoch, "loss": 1.0 / (epoch + 1)}), flush=True)
"""


@pytest.mark.parametrize("subdir", ["2", None])
async def test_a_trainer_saving_below_the_output_dir_is_probed_and_served_from_its_checkpoint_subdir(tmp_path, subdir):
    models = build_tiny_models(tmp_path / "tiny")
    trainer = write_script(tmp_path / "epochs.py", EPOCH_TRAINER)
    argv = [PY, str(trainer), "--from", str(models["draft"]), "--out", "{output_dir}", "--corpus", "{corpus_train}"]
    bundle, approved, trigger = _approved(tmp_path, argv, target=str(models["target"]), checkpoint_subdir=subdir)
    output = Path(approved.plan.output_dir)
    if subdir is None:  # {output_dir} itself holds only the epoch folders: nothing to load there
        with pytest.raises(TrainingStopped) as stopped:
            await execute(bundle, approved, trigger, _ctx(Bus()), recheck=_idle)
        assert stopped.value.error_type == "ProbeFailed"
        assert f"no config.json in {output}" in stopped.value.reason and "checkpoint_subdir" in stopped.value.reason
        return
    completed = await execute(bundle, approved, trigger, _ctx(Bus()), recheck=_idle)
    assert completed.checkpoint_dir == approved.plan.checkpoint_dir == f"{output}/2"  # what {training.output} serves
    report = bundle.read_json(RUN, "training/probes.json")
    assert report["passed"] and report["checkpoint_dir"] == f"{output}/2"
    manifest = bundle.read_json(RUN, "training/outputs.json")
    assert manifest["checkpoint_subdir"] == "2" and manifest["output_dir"] == str(output)
    paths = [f["path"] for f in manifest["files"]]
    assert {"0/config.json", "1/config.json", "2/config.json", "2/model.safetensors"} <= set(paths)  # every epoch kept
    assert bundle.read_json(RUN, "training/input-key.json")["inputs"]["checkpoint_subdir"] == "2"
