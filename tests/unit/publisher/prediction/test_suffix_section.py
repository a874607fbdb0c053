"""The report's suffix section: the profiler's offline prediction (profile/SUFFIX_PREDICTION.json) beside
each suffix arm's served acceptance; read from the bundle like the ngram advice, never by the gate."""

from __future__ import annotations

from pathlib import Path

from contracts import layout
from contracts.artifacts.suffix import SuffixCellPrediction, SuffixPrediction
from contracts.campaign import SpeculativeConfig
from contracts.events import SpecDecodeDelta
from services.publisher.prediction.render_predict import suffix_prediction_section
from services.publisher.report.aggregate import read_campaign
from tests.unit.publisher.prediction.test_predict import arm, data
from tests.unit.publisher.synthetic import RUN, Spec, build, section_text

ROOT = Path(__file__).resolve().parents[4]
SUFFIX = SpeculativeConfig(method="suffix", num_speculative_tokens=3)
# Variable-length drafts, as suffix serves them: 22 draft tokens over 10 drafts.
SERVED = SpecDecodeDelta(num_drafts=10, num_draft_tokens=22, num_accepted_tokens=11, accepted_per_position=[6, 3, 2],
                         acceptance_rate=0.5, mean_acceptance_length=2.1)
PREDICTED = SuffixPrediction(package="arctic-inference==0.3.0", tokens="tokenizer.json", unavailable_reason=None,
                             cells=[
    SuffixCellPrediction(cell_id="suffix-k3", num_speculative_tokens=3, max_tree_depth=24, max_cached_requests=10000,
                         max_spec_factor=1.0, min_token_prob=0.1, requests=4, output_tokens=100, steps=60, drafts=40,
                         draft_tokens=80, accepted_tokens=40, acceptance_rate=0.5, mean_acceptance_length=2.0)])


def test_predicted_and_served_acceptance_side_by_side():
    arms = [arm("standing", 1, [10.0, 10.0, 10.0]),
            arm("suffix-k3", 1, [8.0, 8.0, 8.0], spec=SUFFIX, spec_decode=[SERVED] * 3)]
    text = section_text(suffix_prediction_section(data(arms, suffix_prediction=PREDICTED)))
    row = next(line for line in text.splitlines() if line.startswith("Ref(") and "suffix-k3" in line)
    # predicted 50 % / 2.00, served 11 of 22 draft tokens = 50 %, 1 + 11/10 = 2.10, 2.20 tokens per draft
    assert "| 50% | 2.00 | 50% | 2.10 | 2.20" in row
    assert "gate decides on the served figures only" in text and "arctic-inference==0.3.0" in text


def test_without_a_prediction_the_served_figures_stand_with_the_reason():
    arms = [arm("suffix-k3", 1, [8.0], spec=SUFFIX, spec_decode=[SERVED])]
    gone = SuffixPrediction(package=None, tokens=None, cells=[], unavailable_reason="no corpus: shapes")
    text = section_text(suffix_prediction_section(data(arms, suffix_prediction=gone)))
    assert "No prediction: no corpus: shapes." in text and "| - | - | 50% | 2.10" in text
    assert "no suffix candidate" in section_text(suffix_prediction_section(data([arm("standing", 1, [8.0])])))


def test_the_bundle_file_is_read_into_the_report_data(tmp_path):
    from services.runtime.bundle.bundle import BundleStore

    store = BundleStore(tmp_path / "bundles", fsync=False)
    build(store, Spec())
    assert read_campaign(store, RUN).suffix_prediction is None
    store.write_json(RUN, layout.PROFILE_SUFFIX, PREDICTED)
    assert read_campaign(store, RUN).suffix_prediction == PREDICTED


def test_the_gate_never_reads_the_prediction():
    sources = "".join(p.read_text() for p in (ROOT / "services/gate").rglob("*.py"))
    assert "PROFILE_SUFFIX" not in sources and "SUFFIX_PREDICTION" not in sources
    assert "contracts.artifacts.suffix" not in sources
