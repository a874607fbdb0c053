"""Campaign-level rules (skipping training), corpus splits, and the stop verdict."""

from __future__ import annotations

import json

import yaml

from contracts.envelope import ArtifactRef
from services.trainer_proxy.execution.capture import TrainingCapture
from services.trainer_proxy.execution.execute import stop_reason
from services.trainer_proxy.execution.loss import scan_bytes
from services.trainer_proxy.planning.inputs import load_cells, prompt_messages, skip_reason, split_corpus
from tests.unit.trainer_proxy.helpers import EXAMPLE, campaign, corpus_bytes
from tests.unit.trainer_proxy.planning.test_training_plan import INPUTS, PATHS, RUN, _plan

ARGV = ["python", "train.py", "{output_dir}"]


def test_a_campaign_with_a_draft_cell_trains(tmp_path):
    camp = campaign(train_argv=ARGV)
    assert skip_reason(camp, load_cells(camp, tmp_path)) is None


def test_a_shapes_only_campaign_skips_training_with_the_reason(tmp_path):
    camp = campaign(train_argv=ARGV, shapes=True)
    assert "shapes-only" in skip_reason(camp, load_cells(camp, tmp_path))


def test_a_matrix_without_training_output_skips_training(tmp_path):
    data = yaml.safe_load(EXAMPLE.read_text())
    matrix = {"cells": [c for c in data["matrix"]["cells"] if c["cell_id"] != "draft-k3"]}
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(matrix))
    data["matrix"] = {"path": "matrix.yaml"}
    from contracts.campaign import Campaign

    camp = Campaign.model_validate(data)
    cells = load_cells(camp, tmp_path)
    assert [c.cell_id for c in cells] == ["standing", "ngram-k3"]
    assert "{training.output}" in skip_reason(camp, cells)


def test_the_train_split_is_byte_exact_and_bad_lines_are_counted():
    data = corpus_bytes(train=3, heldout=2) + b"not json\n" + b'{"split": "validation"}\n' + b"\n"
    split = split_corpus(data)
    assert (split.train_records, split.heldout_records, split.rejected_lines) == (3, 2, 2)
    source_lines = data.split(b"\n")
    assert split.train == b"".join(line + b"\n" for line in source_lines if b'"split": "train"' in line)
    assert all(json.loads(line)["split"] == "heldout" for line in split.heldout.splitlines())
    assert prompt_messages(split.heldout, 1) == [[{"role": "user", "content": "hello world number 3"}]]


def _capture(**changes) -> TrainingCapture:
    ref = ArtifactRef(uri=f"bundle://{RUN}/training/x", sha256="b" * 64, size_bytes=1)
    fields = dict(
        run_id=RUN, plan_sha256="c" * 64, executor="local", node="n", handle="1", argv=["t"], launched_argv=["t"],
        cwd="/", exit_code=0, signal=None, duration_s=1.0, timed_out=False, stopped_for_loss=False,
        interrupted=False, launch_error=None, losses=[scan_bytes("stdout", b"loss=0.5\n")],
        stdout=ref, stderr=ref, outputs=ref, output_files=2, scheduler_record=None,
    )
    fields.update(changes)
    return TrainingCapture(**fields)


def test_stop_reasons_in_order():
    plan = _plan(campaign(train_argv=ARGV, timeout_s=7))
    assert stop_reason(plan, _capture(), "") is None
    kind, reason = stop_reason(plan, _capture(exit_code=3), "boom")
    assert kind == "TrainerFailed" and "exited 3" in reason and "boom" in reason
    kind, reason = stop_reason(plan, _capture(exit_code=None, signal=9), "")
    assert kind == "TrainerFailed" and "signal 9" in reason
    nan = [scan_bytes("stdout", b'{"loss": 1.0}\nloss=nan\n')]
    kind, reason = stop_reason(plan, _capture(losses=nan, stopped_for_loss=True, exit_code=None, signal=15), "")
    assert kind == "NonFiniteLoss" and "line 2" in reason and "loss=nan" in reason
    # A NaN in a run that exited 0 still stops the campaign.
    assert stop_reason(plan, _capture(losses=nan), "")[0] == "NonFiniteLoss"
    kind, reason = stop_reason(plan, _capture(timed_out=True, exit_code=None, signal=15, losses=nan), "")
    assert kind == "TrainingTimeout" and "7 s" in reason and "2 output file(s) kept and hashed" in reason
    assert stop_reason(plan, _capture(interrupted=True, exit_code=None), "")[0] == "TrainingInterrupted"
    assert stop_reason(plan, _capture(launch_error="no such file", exit_code=None), "")[0] == "ExecutorFailed"


def test_plan_paths_are_absolute_under_the_run():
    assert PATHS.output_dir.startswith(PATHS.run_dir) and INPUTS.train_records == 6
