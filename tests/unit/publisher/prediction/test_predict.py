"""predict.py on hand-built arms: L / (1 + k c), where speculation stops paying, ngram settings vs advice;
and the rendered report and report.json on synthetic bundles."""

from __future__ import annotations

import math

import orjson
import pytest

from contracts import layout
from contracts.artifacts.report import ReportSummary
from contracts.campaign import SpeculativeConfig
from contracts.events import SpecDecodeDelta
from services.gate.simulate import identity
from services.publisher.pipeline import render_run
from services.publisher.prediction.predict import (
    compare_ngram,
    predicted_speedup,
    predictions,
    report_figures,
    stops_paying,
)
from services.publisher.report.model import ArmLevel, CampaignData, TrialFigures
from tests.unit.publisher.synthetic import CANDIDATE, RUN, Spec, advice, build, draft_cost

SHA = "0" * 64


def counters(drafts: int, accepted: int, k: int) -> SpecDecodeDelta:
    return SpecDecodeDelta(num_drafts=drafts, num_draft_tokens=drafts * k, num_accepted_tokens=accepted,
                           accepted_per_position=[accepted] + [0] * (k - 1), acceptance_rate=accepted / (drafts * k),
                           mean_acceptance_length=1 + accepted / drafts)


def arm(cell: str, level: int, tpots: list[float], spec: SpeculativeConfig | None = None, *,
        spec_decode: list[SpecDecodeDelta] | None = None) -> ArmLevel:
    role = "candidate" if spec is not None else "standing"
    trials = []
    for i, tpot in enumerate(tpots):
        ident = identity(cell, concurrency=level, trial=i, trial_count=len(tpots), speculative=spec,
                         baseline_cell_id="standing" if spec else None, role=role)
        trials.append(TrialFigures(
            trial=i, path=f"bench/{cell}/trial-{i}/result-c{level}.json", sha256=SHA, completed=10, failed=0,
            ttft_ms=10.0, tpot_ms=tpot, itl_ms=tpot, e2el_ms=100.0, output_throughput_tok_per_s=100.0,
            spec_decode=spec_decode[i] if spec_decode else None, accuracy=None, identity=ident,
        ))
    return ArmLevel(key=f"{cell}@c{level}", cell_id=cell, role=role, concurrency=level,
                    baseline_cell_id="standing" if spec else None, identity=trials[0].identity, trials=trials,
                    trials_declared=len(tpots), identity_problems=[])


def data(arms: list[ArmLevel], **fields) -> CampaignData:
    return CampaignData(run_id=RUN, campaign=None, decision=None, decision_sha256=None, plan=None, steps=[],
                        journal_present=True, arms=arms, bench_exploratory=False, failed_cells={}, problems=[],
                        **fields)


DRAFT = SpeculativeConfig(method="draft_model", num_speculative_tokens=4, model="/drafts/d")
NGRAM = SpeculativeConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_min=2, prompt_lookup_max=4)


def test_predicted_speedup_is_l_over_one_plus_k_c():
    assert predicted_speedup(3.0, 4, 0.1) == pytest.approx(3.0 / 1.4)
    assert predicted_speedup(2.5, 5, 0.0) == 2.5


def test_draft_model_prediction_uses_the_measured_draft_cost_and_realized_the_tpot_ratio():
    # Two trials of 100 drafts: 150 and 250 accepted -> L = 1 + 400 / 200 = 3.
    acc = [counters(100, 150, 4), counters(100, 250, 4)]
    arms = [arm("standing", 1, [20.0, 20.0]), arm("draft", 1, [10.0, 40.0], DRAFT, spec_decode=acc)]
    [p] = predictions(data(arms, draft_cost=draft_cost(RUN, 0.125)))
    assert (p.method, p.k, p.mean_length, p.cost) == ("draft_model", 4, pytest.approx(3.0), 0.125)
    assert p.predicted == pytest.approx(3.0 / (1 + 4 * 0.125))
    assert p.realized == pytest.approx(20.0 / math.sqrt(10.0 * 40.0))  # geometric means of per-trial medians


def test_without_draft_cost_a_draft_model_gets_no_prediction_and_ngram_costs_nothing():
    acc = [counters(100, 200, 4)]
    arms = [arm("standing", 1, [20.0]), arm("draft", 1, [10.0], DRAFT, spec_decode=acc),
            arm("ngram", 1, [12.0], NGRAM, spec_decode=[counters(100, 120, 3)]),
            arm("eagle", 1, [12.0], SpeculativeConfig(method="eagle3", num_speculative_tokens=2, model="/e"),
                spec_decode=[counters(100, 50, 2)])]
    by_cell = {p.arm.cell_id: p for p in predictions(data(arms, draft_cost_note="no training/draft-cost.json"))}
    assert by_cell["draft"].predicted is None and by_cell["draft"].cost_source.startswith("draft cost not measured")
    assert by_cell["ngram"].cost == 0.0 and by_cell["ngram"].predicted == pytest.approx(2.2)
    assert by_cell["eagle"].predicted is None and "not measured" in by_cell["eagle"].cost_source
    assert "standing" not in by_cell


@pytest.mark.parametrize(("levels", "verdict", "at"), [
    ([(1, 1.5), (4, 0.9), (16, 0.8)], "stops", 4),
    ([(4, 1.0), (1, 1.2)], "stops", 4),  # order-free; exactly 1x does not pay
    ([(1, 1.5), (None, 0.7)], "stops", None),  # no limit is the highest level
    ([(1, 1.2), (4, 1.1)], "pays_everywhere", None),
    ([(1, 0.9), (4, 0.95)], "pays_nowhere", None),
    ([(1, 0.9), (4, 1.2)], "pays_from", None),
    ([(1, None)], "unmeasured", None),
])
def test_where_speculation_stops_paying(levels, verdict, at):
    found = stops_paying("c", levels)
    assert found.verdict == verdict and found.stops == (verdict == "stops")
    if verdict == "stops":
        assert found.level == at and f"concurrency {'unlimited' if at is None else at}" in found.text
    texts = {"pays_everywhere": "pays at every measured level", "pays_nowhere": "pays at no measured level"}
    if verdict in texts:
        assert found.text == texts[verdict]


def test_a_level_without_a_realized_speedup_is_named_and_skipped():
    found = stops_paying("c", [(1, 1.3), (4, None), (8, 0.9)])
    assert found.level == 8 and "no realized speedup at 4" in found.text


def test_ngram_settings_agree_or_name_what_differs():
    assert compare_ngram("c", NGRAM, advice(), None).sentence == "agree"
    other = compare_ngram("c", NGRAM, advice(k=2, high=6), None)
    assert other.agree is False and other.differing == ("num_speculative_tokens", "prompt_lookup_max")
    assert other.sentence == "differ in k (campaign 3, advice 2), prompt_lookup_max (campaign 4, advice 6)"
    unset = compare_ngram("c", SpeculativeConfig(method="ngram", num_speculative_tokens=3), advice(), None)
    assert "prompt_lookup_min (campaign not set, advice 2)" in unset.sentence
    none = compare_ngram("c", NGRAM, None, "no profile/PROFILE.json in the bundle")
    assert none.agree is None and "no profile/PROFILE.json" in none.sentence
    empty = advice().model_copy(update={"num_speculative_tokens": None, "prompt_lookup_min": None,
                                        "prompt_lookup_max": None, "reasons": ["NA: shapes"]})
    assert compare_ngram("c", NGRAM, empty, None).sentence == "the profile gives no ngram settings: NA: shapes"


def test_report_shows_settings_prediction_stops_and_draft_cost(store):
    build(store, Spec(factors={1: 0.6, 4: 1.2}, ngram_advice=advice(k=5), draft_cost=0.2))
    out = render_run(store, RUN)
    md = out.report.markdown.decode()
    assert "Ngram settings: campaign vs profiler advice" in md and "differ in k (campaign 3, advice 5)" in md
    assert "stops paying at concurrency 4" in md
    assert "predicted = L / (1 + k * c)" in md and "a prompt lookup costs no model forward" in md
    assert "relative to the target's: 0.200" in md
    summary = ReportSummary.model_validate(orjson.loads(store.read_bytes(RUN, layout.REPORT_SUMMARY)))
    assert summary.draft_relative_cost == 0.2
    assert [(s.cell_id, s.concurrency) for s in summary.speedups] == [(CANDIDATE, 1), (CANDIDATE, 4)]
    assert all(s.relative_draft_cost == 0.0 and s.predicted == s.mean_acceptance_length for s in summary.speedups)
    assert summary.speedups[1].realized < 1 < summary.speedups[0].realized
    assert [(s.verdict, s.stops_at) for s in summary.stops_paying] == [("stops", 4)]
    [ngram] = summary.ngram_settings
    assert (ngram.agree, ngram.differing, ngram.advised_num_speculative_tokens) == (
        False, ["num_speculative_tokens"], 5)


def test_without_cost_or_advice_the_report_says_so_and_stays_final(store):
    build(store, Spec(ngram_advice=None))
    out = render_run(store, RUN)
    md = out.report.markdown.decode()
    assert "Draft cost not measured: no training/draft-cost.json in the bundle" in md
    assert "predates ngram advice" in md
    assert not out.summary.draft and out.summary.draft_relative_cost is None


def test_an_invalid_profile_is_a_note_not_a_draft_reason(campaign_data):
    found = campaign_data(profile_bytes=b"{}")
    assert found.ngram_advice is None and "not a valid Profile" in found.ngram_advice_note
    assert not found.problems
    figures = report_figures(found)
    assert figures["ngram_settings"][0].agree is None


def test_an_older_report_json_without_the_prediction_fields_still_validates():
    old = {"version": 1, "run_id": RUN, "draft": False, "draft_reasons": [], "decision": None,
           "decision_sha256": None, "plots": [], "levers": []}
    summary = ReportSummary.model_validate(old)
    assert summary.speedups == [] and summary.draft_relative_cost is None
