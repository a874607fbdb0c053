"""Finding an earlier run's identical draft in the bundle root, and copying it:
only a completed training under the same key whose files all still hash as
recorded is reused; the copy is checked against the source's manifest."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from contracts import layout
from contracts.artifacts.training import FileDigest, InputKey, KeyRecord, TreeDigest
from contracts.envelope import ArtifactRef
from services.runtime.bundle.bundle import BundleStore
from services.trainer_proxy.errors import TrainingStopped
from services.trainer_proxy.execution.capture import hash_outputs
from services.trainer_proxy.planning.builder import PlanPaths, build_plan
from services.trainer_proxy.planning.input_key import input_key
from services.trainer_proxy.planning.model import PlanInputs
from services.trainer_proxy.planning.reuse import copy_draft, find_reusable, read_reuse
from tests.unit.trainer_proxy.helpers import campaign

ARGV = ["python", "train.py", "--corpus", "{corpus_train}", "--out", "{output_dir}"]
OLD, NEW = "toy-20261130-000001-aaaaaa", "toy-20261130-000009-ffffff"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _key(train: str = "train", subdir: str | None = None) -> InputKey:
    camp = campaign(train_argv=ARGV, target="models/t", checkpoint_subdir=subdir)
    return input_key(camp, train_sha256=_sha(train), heldout_sha256=_sha("h"),
                     corpus_sha256=_sha("c"),
                     target=TreeDigest(path="models/t", files=1, total_bytes=1, sha256=_sha("t")),
                     tokenizer=None, named_files=[FileDigest(path="train.py", size_bytes=1, sha256=_sha("s"))])


@pytest.fixture
def bundle(tmp_path: Path) -> BundleStore:
    return BundleStore(tmp_path / "bundles", fsync=False)


def completed(bundle: BundleStore, run_id: str, key: InputKey, *, partial: bool = False) -> Path:
    """A run whose training completed under `key`: a two-file draft, its manifest and key record."""
    out = bundle.run_dir(run_id) / "training/output"
    (out / "sub").mkdir(parents=True)
    (out / "config.json").write_text('{"vocab_size": 100}')
    (out / "sub/model.safetensors").write_bytes(bytes(range(256)) * 4)
    ref, _ = hash_outputs(bundle, run_id, output_dir=out, partial=partial)
    bundle.write_json(run_id, layout.TRAINING_INPUT_KEY,
                      KeyRecord(run_id=run_id, key=key.key, inputs=key, output=ref, reused_from=None))
    return out


def test_a_completed_identical_training_is_found_and_the_own_run_is_not(bundle):
    out = completed(bundle, OLD, _key())
    lookup = find_reusable(bundle, _key(), NEW)
    assert lookup.found is not None and lookup.found.from_run == OLD and "reused: run " + OLD in lookup.note
    assert lookup.found.files == 2 and lookup.found.checkpoint_dir == str(out.absolute())
    assert lookup.found.manifest == bundle.ref(OLD, "training/outputs.json")
    assert find_reusable(bundle, _key(), OLD).found is None  # a run never reuses itself
    assert find_reusable(bundle, _key("other train"), NEW).found is None


def test_the_most_recently_completed_intact_draft_wins(bundle):
    other = "toy-20261130-000005-cccccc"
    completed(bundle, OLD, _key())
    completed(bundle, other, _key())
    # Completion order, not run-ID order: OLD's record is the newer one here.
    os.utime(bundle.run_dir(other) / layout.TRAINING_INPUT_KEY, ns=(1_000_000_000, 1_000_000_000))
    os.utime(bundle.run_dir(OLD) / layout.TRAINING_INPUT_KEY, ns=(2_000_000_000, 2_000_000_000))
    assert find_reusable(bundle, _key(), NEW).found.from_run == OLD
    os.utime(bundle.run_dir(other) / layout.TRAINING_INPUT_KEY, ns=(3_000_000_000, 3_000_000_000))
    assert find_reusable(bundle, _key(), NEW).found.from_run == other


@pytest.mark.parametrize("damage", ["tampered", "missing", "partial"])
def test_a_changed_missing_or_partial_draft_is_not_reused(bundle, damage):
    out = completed(bundle, OLD, _key(), partial=damage == "partial")
    if damage == "tampered":
        with open(out / "sub/model.safetensors", "r+b") as fh:
            fh.write(b"\xff")
    elif damage == "missing":
        (out / "config.json").unlink()
    lookup = find_reusable(bundle, _key(), NEW)
    assert lookup.found is None and f"run {OLD}" in lookup.note and "trainer runs" in lookup.note
    expected = {"tampered": "sub/model.safetensors changed", "missing": "config.json is missing", "partial": "partial"}
    assert expected[damage] in lookup.note


def _reuse_plan(bundle: BundleStore, run_id: str, subdir: str | None = None):
    lookup = find_reusable(bundle, _key(subdir=subdir), run_id)
    run_dir = str(bundle.run_dir(run_id).absolute())
    paths = PlanPaths(run_dir=run_dir, cwd="/srv", corpus=f"{run_dir}/corpus/CORPUS.jsonl",
                      corpus_train=f"{run_dir}/training/corpus-train.jsonl",
                      corpus_heldout=f"{run_dir}/training/corpus-heldout.jsonl")
    ref = ArtifactRef(uri=f"bundle://{run_id}/training/corpus-train.jsonl", sha256=_sha("train"), size_bytes=1)
    inputs = PlanInputs(corpus=ref, corpus_train=ref, corpus_heldout=ref, train_records=1, heldout_records=0,
                        rejected_lines=0)
    return build_plan(campaign(train_argv=ARGV, target="models/t", checkpoint_subdir=subdir), run_id=run_id, node="n",
                      scheduler="local", paths=paths, inputs=inputs, input_key=_key(subdir=subdir), reuse=lookup.found,
                      reuse_note=lookup.note)


def test_a_reuse_plan_launches_nothing_and_says_from_which_run(bundle):
    completed(bundle, OLD, _key())
    plan = _reuse_plan(bundle, NEW)
    assert plan.launch is None and plan.probes is None
    assert plan.reuse is not None and plan.reuse.from_run == OLD and plan.reuse.key == _key().key
    assert any(OLD in line for line in plan.expected_outputs) and "ReuseFailed" in plan.stop_conditions[0]
    off = build_plan(campaign(train_argv=ARGV, target="models/t", reuse=False), run_id=NEW, node="n", scheduler="local",
                     paths=PlanPaths(run_dir="/b", cwd="/srv", corpus="/c", corpus_train="/t", corpus_heldout="/h"),
                     inputs=plan.inputs, input_key=_key(), reuse=plan.reuse, reuse_note="found")
    assert off.reuse is None and off.launch is not None and "commands.train.reuse is false" in off.reuse_note


def test_the_copy_is_byte_identical_and_its_manifest_names_the_source(bundle):
    source = completed(bundle, OLD, _key())
    plan = _reuse_plan(bundle, NEW)
    record = copy_draft(bundle, plan, _sha("plan"))
    copy = Path(plan.output_dir)
    for rel in ("config.json", "sub/model.safetensors"):
        assert (copy / rel).read_bytes() == (source / rel).read_bytes()
        assert (copy / rel).stat().st_ino != (source / rel).stat().st_ino  # a copy, not a link
    manifest = bundle.read_json(NEW, "training/outputs.json")
    assert manifest["reused_from"] == OLD and manifest["run_id"] == NEW and not manifest["partial"]
    assert record.reused_from == OLD and record.files == 2 and record.output == bundle.ref(NEW, "training/outputs.json")
    assert read_reuse(bundle, NEW) is None  # the caller writes the record once the copy is whole


def test_a_draft_changed_after_the_plan_fails_the_copy(bundle):
    source = completed(bundle, OLD, _key())
    plan = _reuse_plan(bundle, NEW)
    with open(source / "config.json", "ab") as fh:
        fh.write(b" ")
    with pytest.raises(TrainingStopped) as stopped:
        copy_draft(bundle, plan, _sha("plan"))
    assert stopped.value.error_type == "ReuseFailed" and "config.json" in stopped.value.reason
    assert "nothing was trained" in stopped.value.reason


def test_a_draft_in_a_checkpoint_subdir_is_reused_only_under_the_same_subdir_and_the_copy_names_it(bundle):
    completed(bundle, OLD, _key(subdir="sub"))
    assert find_reusable(bundle, _key(), NEW).found is None  # {output_dir} itself is another draft
    assert find_reusable(bundle, _key(subdir="other"), NEW).found is None
    plan = _reuse_plan(bundle, NEW, subdir="sub")
    assert plan.reuse is not None and plan.checkpoint_dir == f"{plan.output_dir}/sub"
    assert any(line.startswith(f"{plan.checkpoint_dir}: the draft checkpoint") for line in plan.expected_outputs)
    record = copy_draft(bundle, plan, _sha("plan"))
    assert record.checkpoint_dir == plan.checkpoint_dir
    assert (Path(record.checkpoint_dir) / "model.safetensors").is_file()
    assert bundle.read_json(NEW, "training/outputs.json")["checkpoint_subdir"] == "sub"
