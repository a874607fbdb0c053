"""The training input key: the same inputs in another run give the same key, and
changing any input that determines the draft changes it."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from contracts.artifacts.training import FileDigest, TreeDigest
from contracts.campaign import Campaign
from contracts.envelope import ArtifactRef
from services.runtime.bundle.bundle_records import canonical_json
from services.trainer_proxy.planning.input_key import input_key, tree_sha256
from services.trainer_proxy.planning.model import PlanInputs
from services.trainer_proxy.planning.reuse import compute_key, named_files, tree_digest
from tests.unit.trainer_proxy.helpers import campaign

ARGV = ["python", "train.py", "--corpus", "{corpus_train}", "--target", "{target}", "--out", "{output_dir}",
        "--tag", "{run_id}@{node}", "--len", "{max_model_len}"]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


TARGET = TreeDigest(path="models/t", files=2, total_bytes=30, sha256=_sha("target"))
BASE: dict[str, Any] = {  # PlanInputs' fields
    "train_sha256": _sha("train"),
    "heldout_sha256": _sha("heldout"),
    "corpus_sha256": _sha("corpus"),
    "target": TARGET,
    "tokenizer": None,
    "named_files": [FileDigest(path="train.py", size_bytes=10, sha256=_sha("script"))],
}


def _camp(**changes) -> Campaign:
    data = campaign(train_argv=ARGV, target="models/t").model_dump(by_alias=True)
    for path, value in changes.items():
        node = data
        *parents, leaf = path.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = value
    return Campaign.model_validate(data)


def _key(camp: Campaign | None = None, **inputs) -> str:
    return input_key(camp or _camp(), **{**BASE, **inputs}).key


def test_run_specific_values_enter_the_key_as_their_role():
    key = input_key(_camp(), **BASE)
    assert key.argv == ["python", "train.py", "--corpus", "{corpus_train}", "--target", "models/t", "--out",
                        "{output_dir}", "--tag", "{run_id}@{node}", "--len", "512"]
    assert key.heldout_sha256 is None and key.corpus_sha256 is None  # this argv reads neither
    assert _key() == key.key  # deterministic


INPUT_CHANGES = {
    "train split": {"train_sha256": _sha("other train")},
    "target files": {"target": TARGET.model_copy(update={"sha256": _sha("retrained target")})},
    "tokenizer": {"tokenizer": TreeDigest(path="tok", files=1, total_bytes=5, sha256=_sha("tok"))},
    "trainer script": {"named_files": [FileDigest(path="train.py", size_bytes=10, sha256=_sha("edited"))]},
    "another named file": {
        "named_files": [*BASE["named_files"], FileDigest(path="c.yaml", size_bytes=1, sha256=_sha("c"))]},
}
CAMPAIGN_CHANGES = {
    "argv": {"commands.train.argv": [*ARGV, "--epochs", "3"]},
    # Renders like "{output_dir}" with roles, but the trainer would see the literal text.
    "literal braces": {"commands.train.argv": [*ARGV[:7], "{{output_dir}}", *ARGV[8:]]},
    "probe": {"commands.train.probe": ["python", "probe.py", "{training.output}"]},
    "target path": {"target.checkpoint": "models/t2"},
    "max_model_len": {"target.max_model_len": 1024},
    "trainer revision": {"source_revisions.trainer": "trainer@abc123"},
    "target revision": {"source_revisions.target": "target@def456"},
    "executor": {"capacity.scheduler": "slurm"},
    # Another folder of the same output is another draft (speculators: another epoch).
    "checkpoint subdir": {"commands.train.checkpoint_subdir": "9"},
}


@pytest.mark.parametrize("name", sorted(INPUT_CHANGES))
def test_changing_a_hashed_input_changes_the_key(name):
    assert _key(**INPUT_CHANGES[name]) != _key()


@pytest.mark.parametrize("name", sorted(CAMPAIGN_CHANGES))
def test_changing_what_the_campaign_says_changes_the_key(name):
    assert _key(_camp(**CAMPAIGN_CHANGES[name])) != _key()


def test_an_unset_checkpoint_subdir_leaves_the_key_as_it_was_before_the_field():
    """Drafts recorded under keys computed before checkpoint_subdir existed are still found."""
    key = input_key(_camp(), **BASE)
    before = key.model_dump(mode="json", exclude={"key", "checkpoint_subdir"})
    assert key.checkpoint_subdir is None and key.key == hashlib.sha256(canonical_json(before)).hexdigest()
    subdir = input_key(_camp(**{"commands.train.checkpoint_subdir": "9"}), **BASE)
    assert subdir.checkpoint_subdir == "9" and subdir.key == hashlib.sha256(
        canonical_json(subdir.model_dump(mode="json", exclude={"key"}))).hexdigest()


def test_heldout_and_corpus_count_only_when_an_argv_reads_them():
    assert _key(heldout_sha256=_sha("x"), corpus_sha256=_sha("y")) == _key()
    reads_heldout = _camp(**{"commands.train.argv": [*ARGV, "--eval", "{corpus_heldout}"]})
    assert _key(reads_heldout, heldout_sha256=_sha("x")) != _key(reads_heldout)
    probe_reads = _camp(**{"commands.train.probe": ["python", "p.py", "{corpus_heldout}"]})
    assert _key(probe_reads, heldout_sha256=_sha("x")) != _key(probe_reads)
    reads_corpus = _camp(**{"commands.train.argv": [*ARGV, "--all", "{corpus}"]})
    assert _key(reads_corpus, corpus_sha256=_sha("y")) != _key(reads_corpus)
    assert _key(reads_corpus, heldout_sha256=_sha("x")) != _key(reads_corpus)  # {corpus} holds the heldout too


def test_what_does_not_determine_the_draft_leaves_the_key_alone():
    unchanged = [
        _camp(**{"commands.train.timeout_s": 5}),
        _camp(**{"commands.train.reuse": False}),
        _camp(**{"capacity.selectors": {"partition": "gpu"}}),
        _camp(**{"source_revisions.serving": "vllm==9"}),
    ]
    assert {_key(camp) for camp in unchanged} == {_key()}


def _inputs(run_id: str, sha: dict[str, str]) -> PlanInputs:
    def ref(path: str, name: str) -> ArtifactRef:
        return ArtifactRef(uri=f"bundle://{run_id}/{path}", sha256=sha[name], size_bytes=10)

    return PlanInputs(corpus=ref("corpus/CORPUS.jsonl", "corpus"),
                      corpus_train=ref("training/corpus-train.jsonl", "train"),
                      corpus_heldout=ref("training/corpus-heldout.jsonl", "heldout"), train_records=6,
                      heldout_records=2, rejected_lines=0)


def test_the_same_files_in_another_run_give_the_same_key_and_a_changed_byte_another(tmp_path):
    target = tmp_path / "models/t"
    (target / "sub").mkdir(parents=True)
    (target / "config.json").write_text('{"vocab_size": 100}')
    (target / "sub/weights.bin").write_bytes(b"\x00" * 64)
    (tmp_path / "train.py").write_text("print('train')\n")
    sha = {"corpus": _sha("c"), "train": _sha("t"), "heldout": _sha("h")}
    camp = _camp()
    first, why = compute_key(camp, _inputs("toy-20261130-000001-aaaaaa", sha), str(tmp_path))
    second, _ = compute_key(camp, _inputs("toy-20261130-000002-bbbbbb", sha), str(tmp_path))
    assert first is not None and why == ""
    assert first == second
    assert first.target.files == 2 and [f.path for f in first.named_files] == ["train.py"]

    (target / "sub/weights.bin").write_bytes(b"\x00" * 63 + b"\x01")
    changed, _ = compute_key(camp, _inputs("toy-20261130-000002-bbbbbb", sha), str(tmp_path))
    assert changed is not None and changed.key != first.key

    (tmp_path / "train.py").write_text("print('edited trainer')\n")
    edited, _ = compute_key(camp, _inputs("toy-20261130-000002-bbbbbb", sha), str(tmp_path))
    assert edited is not None and edited.key != changed.key


def test_a_target_that_is_not_a_local_file_or_folder_gives_no_key(tmp_path):
    key, why = compute_key(_camp(**{"target.checkpoint": "org/hub-model"}), _inputs("r-1", {
        "corpus": _sha("c"), "train": _sha("t"), "heldout": _sha("h")}), str(tmp_path))
    assert key is None and "org/hub-model" in why and "trainer runs" in why


def test_tree_digest_follows_file_symlinks_and_folders_are_not_named_files(tmp_path):
    blob = tmp_path / "blobs/abc"
    blob.parent.mkdir()
    blob.write_bytes(b"weights")
    snap = tmp_path / "snapshot"
    snap.mkdir()
    (snap / "model.bin").symlink_to(blob)
    digest = tree_digest("snapshot", str(tmp_path))
    expected = tree_sha256([FileDigest(path="model.bin", size_bytes=7, sha256=hashlib.sha256(b"weights").hexdigest())])
    assert digest is not None and digest.files == 1 and digest.sha256 == expected
    assert tree_digest("absent", str(tmp_path)) is None
    camp = _camp(**{"commands.train.argv": ["python", "snapshot", "blobs/abc"]})
    assert [f.path for f in named_files(camp, str(tmp_path))] == ["blobs/abc"]
