"""The report's trained-draft section: the trainer's offline acceptance (training/output/offline-acceptance.json,
found through training/outputs.json) beside each trained arm's served per-position acceptance, with the error;
read from the bundle like the suffix prediction, never by the gate."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from contracts import layout
from contracts.artifacts.offline_acceptance import OFFLINE_ACCEPTANCE_FILE, OfflineAcceptance
from contracts.artifacts.report import ReportSummary
from contracts.artifacts.training import OutputFile, OutputManifest
from contracts.campaign import TRAINED_DRAFT, SpeculativeConfig
from contracts.events import SpecDecodeDelta
from services.publisher.prediction.offline_section import offline_acceptance_section, offline_figures
from services.publisher.report.aggregate import read_campaign
from services.runtime.bundle.bundle import BundleStore
from tests.unit.publisher.prediction.test_predict import arm, data
from tests.unit.publisher.synthetic import RUN, Spec, build, section_text

ROOT = Path(__file__).resolve().parents[4]
EAGLE = SpeculativeConfig(method="eagle3", num_speculative_tokens=3, model=TRAINED_DRAFT)
# 10 drafts per trial: a = 6/10, 4/10, 2/10; length 1 + 12/10 = 2.2.
SERVED = SpecDecodeDelta(num_drafts=10, num_draft_tokens=30, num_accepted_tokens=12, accepted_per_position=[6, 4, 2],
                         acceptance_rate=0.4, mean_acceptance_length=2.2)
# 100 drafts: a = 0.7, 0.5, 0.3 from the counts (the rounded shares are deliberately off: the counts rule);
# length 2.5.
OFFLINE = OfflineAcceptance(
    format=1, method="eagle3", definition="teacher-forced", heldout_prompts=5, prompts_too_long=0, answers=5,
    drafts=100, accepted_per_position=[70, 50, 30], per_position_acceptance=[0.7001, 0.5, 0.3],
    num_speculative_tokens=3, acceptance_length=2.5, acceptance_rate=0.5, max_new_tokens=48)


def _rows(text: str, cell: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"Ref(key='{cell}@")]


def test_offline_beside_served_with_the_error_per_position_and_for_the_length():
    arms = [arm("standing", 1, [10.0, 10.0]), arm("eagle3-k3", 1, [8.0, 8.0], spec=EAGLE, spec_decode=[SERVED] * 2)]
    text = section_text(offline_acceptance_section(data(arms, offline_acceptance=OFFLINE)))
    [row] = _rows(text, "eagle3-k3")
    assert ("| 3/3 | 0.700 / 0.500 / 0.300 | 0.600 / 0.400 / 0.200 | -0.100 / -0.100 / -0.100 "
            "| 2.500 | 2.200 | -0.300") in row
    assert "100 drafts over 5 of 5 held-out prompts" in text and "the gate never reads it" in text
    assert not _rows(text, "standing")


def test_a_resolved_draft_path_is_the_trained_draft_only_when_it_is_the_trainers_folder():
    trained = SpeculativeConfig(method="eagle3", num_speculative_tokens=3, model="/b/run/training/output")
    other = SpeculativeConfig(method="draft_model", num_speculative_tokens=3, model="/drafts/d")
    arms = [arm("eagle3-k3", 4, [8.0], spec=trained, spec_decode=[SERVED]),
            arm("draft-k3", 4, [8.0], spec=other, spec_decode=[SERVED])]
    text = section_text(offline_acceptance_section(data(arms, offline_acceptance=OFFLINE,
                                                 training_output_dir="/b/run/training/output/")))
    assert len(_rows(text, "eagle3-k3")) == 1 and not _rows(text, "draft-k3")
    assert "no trained draft candidate" in section_text(
        offline_acceptance_section(data(arms, offline_acceptance=OFFLINE)))


def test_different_k_compares_the_common_positions_and_not_the_lengths():
    five = SpecDecodeDelta(num_drafts=10, num_draft_tokens=50, num_accepted_tokens=15,
                           accepted_per_position=[6, 4, 2, 2, 1], acceptance_rate=0.3, mean_acceptance_length=2.5)
    arms = [arm("eagle3-k5", 1, [8.0], spec=EAGLE.model_copy(update={"num_speculative_tokens": 5}),
                spec_decode=[five]),
            arm("eagle3-k3", 1, [8.0], spec=EAGLE)]  # served without drafts
    text = section_text(offline_acceptance_section(data(arms, offline_acceptance=OFFLINE)))
    [row] = _rows(text, "eagle3-k5")
    assert "| 3/5 | " in row and "-0.100 / -0.100 / -0.100 / - / -" in row
    assert row.endswith("not compared: k differs (3 offline, 5 served)")
    [silent] = _rows(text, "eagle3-k3")
    assert "| no drafts | - | 2.500 | - | -" in silent


def test_without_the_estimate_the_section_is_one_line():
    arms = [arm("eagle3-k3", 1, [8.0], spec=EAGLE, spec_decode=[SERVED])]
    section = offline_acceptance_section(data(arms, offline_acceptance_note="no training/outputs.json in the bundle"))
    assert len(section.blocks) == 1
    assert section_text(section) == "No offline estimate: no training/outputs.json in the bundle."


def _outputs(store: BundleStore, files: dict[str, bytes]) -> None:
    entries = []
    for name, raw in sorted(files.items()):
        ref = store.write_bytes(RUN, f"{layout.TRAINING_OUTPUT_DIR}/{name}", raw)
        entries.append(OutputFile(path=name, kind="file", sha256=ref.sha256, size_bytes=len(raw), uri=ref.uri))
    manifest = OutputManifest(run_id=RUN, output_dir=str(store.run_dir(RUN) / layout.TRAINING_OUTPUT_DIR),
                              partial=False, files=entries, total_bytes=sum(len(v) for v in files.values()))
    store.write_json(RUN, layout.TRAINING_OUTPUTS, manifest)


@pytest.mark.parametrize(("files", "note"), [
    ({"config.json": b"{}"},
     f"the trainer wrote no {OFFLINE_ACCEPTANCE_FILE} (training/outputs.json lists no such file)"),
    ({OFFLINE_ACCEPTANCE_FILE: b"{\"format\": 1}"}, "is not a valid OfflineAcceptance"),
    ({OFFLINE_ACCEPTANCE_FILE: b"not json"}, "is not JSON"),
])
def test_an_absent_or_invalid_estimate_is_a_note_not_a_problem(tmp_path, files, note):
    store = BundleStore(tmp_path / "bundles", fsync=False)
    build(store, Spec())
    _outputs(store, files)
    found = read_campaign(store, RUN)
    assert found.offline_acceptance is None and note in (found.offline_acceptance_note or "")
    assert not [p for p in found.problems if OFFLINE_ACCEPTANCE_FILE in p]


def test_the_listed_file_is_read_into_the_report_data(tmp_path):
    store = BundleStore(tmp_path / "bundles", fsync=False)
    build(store, Spec())
    before = read_campaign(store, RUN)
    assert before.offline_acceptance is None
    assert before.offline_acceptance_note == "no training/outputs.json in the bundle"
    _outputs(store, {OFFLINE_ACCEPTANCE_FILE: orjson.dumps(OFFLINE.model_dump()), "config.json": b"{}"})
    after = read_campaign(store, RUN)
    assert after.offline_acceptance == OFFLINE and after.offline_acceptance_note is None
    assert after.training_output_dir == str(store.run_dir(RUN) / layout.TRAINING_OUTPUT_DIR)


def test_the_rendered_report_carries_the_section(clean):
    _, out = clean
    markdown = out.report.markdown.decode()
    assert "## Trained draft: offline vs served acceptance" in markdown
    assert "The campaign has no trained draft candidate (no cell serves '{training.output}')." in markdown


def test_the_gate_never_reads_the_estimate():
    sources = "".join(p.read_text() for p in (ROOT / "services/gate").rglob("*.py"))
    for name in ("offline_acceptance", "offline-acceptance", "OFFLINE_ACCEPTANCE", "TRAINING_OUTPUTS",
                 "OutputManifest"):
        assert name not in sources, name


def test_report_json_carries_the_rows_as_numbers():
    five = SpecDecodeDelta(num_drafts=10, num_draft_tokens=50, num_accepted_tokens=15,
                           accepted_per_position=[6, 4, 2, 2, 1], acceptance_rate=0.3, mean_acceptance_length=2.5)
    arms = [arm("standing", 1, [10.0]), arm("eagle3-k3", 1, [8.0], spec=EAGLE, spec_decode=[SERVED] * 2),
            arm("eagle3-k3", 4, [9.0], spec=EAGLE),  # served without drafts
            arm("eagle3-k5", 1, [8.0], spec=EAGLE.model_copy(update={"num_speculative_tokens": 5}), spec_decode=[five])]
    same, silent, other_k = offline_figures(data(arms, offline_acceptance=OFFLINE))
    assert (same.cell_id, same.concurrency, same.note) == ("eagle3-k3", 1, "")
    assert same.offline_per_position == pytest.approx([0.7, 0.5, 0.3])
    assert same.served_per_position == pytest.approx([0.6, 0.4, 0.2])
    assert same.error_per_position == pytest.approx([-0.1, -0.1, -0.1])
    assert (same.offline_acceptance_length, same.served_acceptance_length, same.acceptance_length_error) == \
        pytest.approx((2.5, 2.2, -0.3))
    assert silent.concurrency == 4 and silent.served_per_position is None and silent.error_per_position == []
    assert silent.acceptance_length_error is None and silent.note == "no drafts served at this level"
    assert len(other_k.error_per_position) == 3 and other_k.acceptance_length_error is None
    assert other_k.note == "lengths not compared: k differs (3 offline, 5 served)"
    assert offline_figures(data(arms, offline_acceptance_note="no training/outputs.json in the bundle")) == []


def test_an_older_report_json_without_the_field_still_reads():
    older = {"version": 1, "run_id": RUN, "draft": False, "draft_reasons": [], "decision": None,
             "decision_sha256": None, "plots": [], "levers": []}
    assert ReportSummary.model_validate(older).offline_acceptance == []
