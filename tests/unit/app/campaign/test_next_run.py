"""`specdec next RUN_ID` (services/app/campaign/next_run.py, services/cli/commands/next.py) on stored bundles:
the campaign it writes submits as it is, benches the standing cell beside the best fixed k and the scheduled cell,
reuses the run's target, traffic, corpus and draft (by its training input key), and pools nothing."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import yaml

from contracts import layout
from contracts.artifacts.training import InputKey, KeyRecord, TreeDigest
from contracts.campaign import Campaign, SpeculativeConfig
from contracts.envelope import ArtifactRef
from services.app.campaign.next_run import write_next
from services.app.campaign.prepare import load_campaign
from services.cli.main import main
from services.gate.simulate import identity, spec_counters, trial_result
from services.publisher.prediction.schedule_plan import best, candidate_plans
from services.publisher.report.aggregate import read_campaign
from services.runtime.bundle.bundle import BundleStore
from services.runtime.errors import ConfigurationError
from tests.unit.publisher import synthetic
from tests.unit.publisher.synthetic import EXAMPLE, ROOT, RUN, Spec, build

DRAFT_RUN = "toy-20261130-020202-abcdef"
KEY = hashlib.sha256(b"training inputs").hexdigest()


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> BundleStore:
    monkeypatch.chdir(ROOT)  # the example campaign's traffic path is relative to the repository
    return BundleStore(tmp_path / "bundles", fsync=False)


def test_the_next_campaign_submits_and_benches_standing_fixed_and_scheduled(store, tmp_path):
    build(store, Spec(factors={1: 0.6, 4: 1.2}))
    old = Campaign.model_validate(store.read_json(RUN, layout.CAMPAIGN))
    found = write_next(store, RUN, tmp_path / "next.yaml")
    campaign, _ = load_campaign(found.path)  # what specdec submit reads: valid, files present
    cells = {c.cell_id: c for c in campaign.matrix.cells}
    assert list(cells) == ["standing", "ngram-k1", "ngram-sched"] == list(found.cells)
    assert cells["standing"] == next(c for c in old.matrix.cells if c.role == "standing")
    chosen = best(candidate_plans(read_campaign(store, RUN)))
    sched = cells["ngram-sched"].serving.speculative
    assert sched.num_speculative_tokens_per_batch_size == [tuple(r) for r in chosen.plan.schedule]
    assert cells["ngram-k1"].serving.speculative.num_speculative_tokens == chosen.plan.fixed_k == 1
    # The same target, traffic, corpus spec, load and gate; nothing trains (the candidate is ngram).
    for name in ("target", "traffic", "corpus", "gate", "capacity"):
        assert getattr(campaign, name) == getattr(old, name), name
    assert campaign.matrix.load == old.matrix.load and campaign.commands.train is None
    text = found.path.read_text()
    assert text.startswith(f"# specdec next {RUN}") and "Predicted TPOT per level" in text
    assert len(found.prediction) == 2 and all("(predicted)" in line for line in found.prediction)
    assert f"No trial is pooled with run {RUN}" in text and "/bench/" not in text


def test_refusals_name_the_reason(store, tmp_path):
    build(store, Spec(factors={1: 0.6, 4: 1.2}))
    taken = tmp_path / "taken.yaml"
    taken.write_text("mine\n")
    with pytest.raises(ConfigurationError, match="exists: give --out a new file"):
        write_next(store, RUN, taken)
    assert taken.read_text() == "mine\n"
    with pytest.raises(ConfigurationError, match="no bundle for run"):
        write_next(store, "toy-20990101-000000-000000", tmp_path / "a.yaml")


def test_no_counters_no_schedule(store, tmp_path):
    build(store, Spec(bare_candidate=True, gate=False))
    with pytest.raises(ConfigurationError, match="no speculative candidate with spec-decode counters"):
        write_next(store, RUN, tmp_path / "a.yaml")
    assert not (tmp_path / "a.yaml").exists()


# --- a trained draft: reused by its key, never trained again -------------------------------------


def _draft_bundle(store: BundleStore, *, key: bool = True) -> None:
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["matrix"]["cells"] = [c for c in raw["matrix"]["cells"] if c["cell_id"] in ("standing", "draft-k3")]
    for cell in raw["matrix"]["cells"]:
        cell["concurrency"] = [1, 4]
    store.write_json(DRAFT_RUN, layout.CAMPAIGN, Campaign.model_validate(raw))
    rng = np.random.default_rng(3)
    ran = SpeculativeConfig(method="draft_model", model="/bundles/run/training/output", num_speculative_tokens=3)
    for level, factor in ((1, 0.6), (4, 1.3)):
        for trial in range(3):
            base = trial_result(rng, concurrency=level, ident=identity("standing", concurrency=level, trial=trial))
            store.write_json(DRAFT_RUN, layout.trial_result("standing", trial, level), base)
            cand = trial_result(rng, factor=factor, concurrency=level, counters=spec_counters(0.6, 3),
                                ident=identity("draft-k3", concurrency=level, trial=trial, speculative=ran,
                                               baseline_cell_id="standing"))
            store.write_json(DRAFT_RUN, layout.trial_result("draft-k3", trial, level), cand)
    if key:
        sha = hashlib.sha256(b"file").hexdigest()
        inputs = InputKey(
            key=KEY, train_sha256=sha, heldout_sha256=None, corpus_sha256=None, argv_template=["train"],
            argv=["train"], probe_template=None, probe=None, named_files=[],
            target=TreeDigest(path="models/t", files=1, total_bytes=1, sha256=sha), tokenizer=None,
            max_model_len=128, trainer_revision=None, target_revision=None, executor="local")
        output = ArtifactRef(uri=f"bundle://{DRAFT_RUN}/training/outputs.json", sha256=sha, size_bytes=1)
        store.write_json(DRAFT_RUN, layout.TRAINING_INPUT_KEY,
                         KeyRecord(run_id=DRAFT_RUN, key=KEY, inputs=inputs, output=output, reused_from=None))


def test_a_trained_draft_is_reused_by_its_key(store, tmp_path):
    _draft_bundle(store)
    found = write_next(store, DRAFT_RUN, tmp_path / "next.yaml")
    campaign, _ = load_campaign(found.path)
    assert campaign.commands.train is not None and campaign.commands.train.reuse is True
    sched = next(c for c in campaign.matrix.cells if c.cell_id == "draft-sched").serving.speculative
    assert sched.model == "{training.output}" and sched.num_speculative_tokens_per_batch_size
    assert KEY in found.draft and KEY in found.path.read_text()


def test_a_draft_without_a_recorded_key_is_refused_not_retrained(store, tmp_path):
    _draft_bundle(store, key=False)
    with pytest.raises(ConfigurationError, match="recorded no training input key"):
        write_next(store, DRAFT_RUN, tmp_path / "next.yaml")


def test_the_cli_prints_the_file_and_refuses_in_one_line(store, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECDEC_BUNDLE_ROOT", str(store.root))
    build(store, Spec(factors={1: 0.6, 4: 1.2}))
    out = tmp_path / "n.yaml"
    assert main(["next", RUN, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert str(out) in printed and "specdec submit" in printed
    assert main(["next", RUN, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "exists" in err


def test_a_schedule_of_one_k_benches_that_fixed_k_alone(store, tmp_path):
    build(store, Spec(factors={1: 0.6, 4: 0.6}))
    found = write_next(store, RUN, tmp_path / "next.yaml")
    campaign, _ = load_campaign(found.path)
    assert [c.cell_id for c in campaign.matrix.cells] == ["standing", "ngram-k2"]
    assert "it is the fixed k, benched alone" in found.path.read_text()


def test_a_campaign_submit_would_refuse_is_not_written(store, tmp_path, monkeypatch):
    # The run's traffic file is gone: the new run could not profile it, submit would refuse the file, and so
    # does specdec next, with submit's own reason, writing nothing.
    traffic = tmp_path / "traffic.jsonl"
    traffic.write_bytes((ROOT / "infra/examples/sample-traffic.jsonl").read_bytes())
    original = synthetic.campaign

    def moved(spec: Spec) -> Campaign:
        found = original(spec)
        return found.model_copy(update={"traffic": found.traffic.model_copy(update={"path": str(traffic)})})

    monkeypatch.setattr(synthetic, "campaign", moved)
    build(store, Spec(factors={1: 0.6, 4: 1.2}))
    traffic.unlink()
    with pytest.raises(ConfigurationError, match="would not submit: missing file: traffic.path"):
        write_next(store, RUN, tmp_path / "next.yaml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundles"]
