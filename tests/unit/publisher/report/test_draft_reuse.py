"""The report says when the draft model was reused from an earlier run, and from which."""

from __future__ import annotations

import hashlib

from contracts.artifacts.training import InputKey, KeyRecord, TreeDigest
from contracts.envelope import ArtifactRef
from contracts.events import TrainingCompleted
from services.publisher.report.aggregate import read_campaign
from services.publisher.report.render import render_report
from services.runtime.bundle.bundle import BundleStore
from tests.unit.publisher.synthetic import RUN, Spec, build

SOURCE = "toy-20261129-235959-fedcba"
KEY = hashlib.sha256(b"training inputs").hexdigest()


def _key_record(output: ArtifactRef, reused_from: str | None) -> KeyRecord:
    """training/input-key.json as the trainer-proxy writes it (contracts.artifacts.training.KeyRecord)."""
    sha = hashlib.sha256(b"file").hexdigest()
    inputs = InputKey(
        key=KEY, train_sha256=sha, heldout_sha256=None, corpus_sha256=None, argv_template=["train"], argv=["train"],
        probe_template=None, probe=None, named_files=[],
        target=TreeDigest(path="models/t", files=1, total_bytes=1, sha256=sha),
        tokenizer=None, max_model_len=128, trainer_revision=None, target_revision=None, executor="local",
    )
    return KeyRecord(run_id=RUN, key=KEY, inputs=inputs, output=output, reused_from=reused_from)


def _bundle(store: BundleStore, reused_from: str | None) -> None:
    build(store, Spec(skip_events=("training.completed",)))
    output = store.write_bytes(RUN, "training/outputs.json", b'{"files": []}\n')
    store.write_json(RUN, "training/input-key.json", _key_record(output, reused_from))
    done = TrainingCompleted(run_id=RUN, producer="trainer-proxy/t", output=output,
                             checkpoint_dir=str(store.run_dir(RUN) / "training/output"), duration_s=0.4,
                             reused_from=reused_from)
    store.append_event(RUN, done.event_id, done.to_json())


def test_a_reused_draft_is_named_with_its_source_run_in_the_data_markdown_and_html(store):
    _bundle(store, SOURCE)
    data = read_campaign(store, RUN)
    assert data.draft_reused_from == SOURCE and data.draft_input_key == KEY and not data.problems
    training = next(s for s in data.steps if s.step == "training")
    assert training.state == "done" and f"reused from run {SOURCE}" in training.detail
    report = render_report(data)
    line = f"draft model: reused from run {SOURCE}, whose training inputs were identical (training input key {KEY})"
    assert line in report.markdown.decode()
    assert line in report.html.decode()


def test_a_draft_trained_in_the_run_says_so(store):
    _bundle(store, None)
    data = read_campaign(store, RUN)
    assert data.draft_reused_from is None and data.draft_input_key == KEY
    markdown = render_report(data).markdown.decode()
    assert f"draft model: trained in this run (training input key {KEY})" in markdown
    assert "reused from" not in markdown


def test_an_invalid_input_key_record_is_a_problem_and_shows_no_key(store):
    build(store, Spec(skip_events=("training.completed",)))
    store.write_json(RUN, "training/input-key.json", {"key": "not-a-sha256", "run_id": RUN, "reused_from": None})
    data = read_campaign(store, RUN)
    assert data.draft_input_key is None
    assert any(p.startswith("training/input-key.json is not a valid KeyRecord") for p in data.problems)
