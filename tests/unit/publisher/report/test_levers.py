"""The next measured lever: each rule fires on the data it is about, and only there."""

from __future__ import annotations

import math

import orjson
import pytest

from contracts.events import SpecDecodeDelta
from services.publisher.report.figures import acceptance, speedups
from services.publisher.report.levers import levers
from tests.unit.publisher.synthetic import CANDIDATE, RUN


def counters(per_position: list[int], *, drafts: int = 2000) -> SpecDecodeDelta:
    accepted = sum(per_position)
    return SpecDecodeDelta(
        num_drafts=drafts, num_draft_tokens=drafts * len(per_position), num_accepted_tokens=accepted,
        accepted_per_position=per_position, acceptance_rate=accepted / (drafts * len(per_position)),
        mean_acceptance_length=1 + accepted / drafts,
    )


def rules(data) -> list[str]:
    return [lever.rule for lever in levers(data)]


def test_acceptance_collapsing_after_position_1_suggests_one_token(campaign_data):
    data = campaign_data(counters=counters([1600, 200, 20]))  # a = 0.80, 0.10, 0.01: p_2 = 0.125
    lever = next(lv for lv in levers(data) if lv.rule == "acceptance-collapse")
    assert "collapses after position 1: p_2 = 0.12" in lever.finding
    assert "num_speculative_tokens = 1 (now 3)" in lever.action
    assert "predicted tokens per step 1.80 instead of 1.91" in lever.action
    assert set(lever.evidence) == {f"{CANDIDATE}@c1", f"{CANDIDATE}@c4"}


def test_acceptance_collapsing_later_keeps_the_positions_before(campaign_data):
    data = campaign_data(counters=counters([1600, 1200, 300]))  # p = 0.80, 0.75, 0.25
    lever = next(lv for lv in levers(data) if lv.rule == "acceptance-collapse")
    assert "num_speculative_tokens = 2 (now 3)" in lever.action


def test_steady_acceptance_does_not_collapse(campaign_data):
    assert "acceptance-collapse" not in rules(campaign_data(counters=counters([1600, 1200, 900])))


def test_a_failed_acceptance_floor_asks_for_a_better_proposer(campaign_data):
    data = campaign_data(acceptance_rate=0.2)
    assert data.decision.decision == "reject"
    lever = next(lv for lv in levers(data) if lv.rule == "floor-failed")
    assert "acceptance_rate 0.2 is below the floor 0.3" in lever.finding
    assert "prompt_lookup_min/max" in lever.action and "ngram" in lever.action


def test_a_win_that_vanishes_at_higher_concurrency_caps_speculation(campaign_data):
    data = campaign_data(factors={1: 0.6, 4: 1.0})
    stops = data.decision.candidates[0].stops_paying_at
    assert stops == 4
    lever = next(lv for lv in levers(data) if lv.rule == "win-vanishes")
    assert "wins at concurrency 1 but not at 4" in lever.finding
    assert "below concurrency 4" in lever.action
    assert "at concurrency 1, 4" in lever.gate


def test_a_small_realized_share_of_the_predicted_speedup_flags_overhead(campaign_data, store):
    data = campaign_data(acceptance_rate=0.6, factors={1: 0.9, 4: 0.9})
    lever = next(lv for lv in levers(data) if lv.rule == "speculation-overhead")
    worst = min(speedups(data), key=lambda s: s.efficiency)
    # Independently: tau from the counters, realized from the result files' median TPOT.
    acc = acceptance(worst.candidate)
    assert acc is not None and worst.predicted == 1 + acc.accepted / acc.drafts
    level = worst.candidate.concurrency

    def geo(cell: str) -> float:
        files = [store.run_dir(RUN) / f"bench/{cell}/trial-{t}/result-c{level}.json" for t in range(3)]
        values = [orjson.loads(f.read_bytes())["median_tpot_ms"] for f in files]
        return math.exp(sum(map(math.log, values)) / 3)

    assert worst.realized == pytest.approx(geo("standing") / geo(CANDIDATE))
    assert worst.efficiency < 0.5
    assert f"realized {worst.realized:.2f}x ({worst.efficiency:.0%} of it)" in lever.finding


def test_noise_asks_for_the_trials_the_interval_needs(campaign_data):
    data = campaign_data()
    cand = data.decision.candidates[0]
    level = cand.levels[0]
    objective = level.objective.model_copy(update={
        "verdict": "within_noise", "delta_pct": -6.0, "noise_bound_pct": 2.0,
        "interval": level.objective.interval.model_copy(update={"low_pct": -14.0, "high_pct": 2.0}),
    })
    levels = [level.model_copy(update={"objective": objective, "outcome": "inconclusive"}), *cand.levels[1:]]
    decision = data.decision.model_copy(update={
        "decision": "inconclusive", "winner": None,
        "candidates": [cand.model_copy(update={"outcome": "inconclusive", "levels": levels})],
    })
    lever = next(lv for lv in levers(data.model_copy(update={"decision": decision})) if lv.rule == "beat-noise")
    # half-width 8 % against an observed 6 %: 3 * (8 / 6)^2 = 5.3 -> 6 trials per arm
    assert "re-bench with 6 trials per arm (now 3)" in lever.action
    assert "at least 6 trials per arm" in lever.gate and "at concurrency 1:" in lever.gate


def test_an_effect_inside_the_noise_bound_asks_for_a_larger_effect(campaign_data):
    data = campaign_data(factors={1: 1.0, 4: 1.0})
    assert data.decision.decision == "inconclusive"
    found = [lv for lv in levers(data) if lv.rule == "beat-noise"]
    assert found
    for lever in found:
        assert "re-bench with" in lever.action or "does not clear the A/A noise bound" in lever.action


def test_failed_requests_come_first(campaign_data):
    data = campaign_data(failed_requests=5, counters=counters([1600, 200, 20]))
    found = rules(data)
    assert found[0] == "failed-requests" and "acceptance-collapse" in found
    from services.gate.simulate import REQUESTS_PER_TRIAL

    share = 5 / (REQUESTS_PER_TRIAL + 5)  # 5 failed of the trial's requests
    assert f"{share:.1%}" in levers(data)[0].finding


def test_a_winner_whose_last_position_still_accepts_tries_one_more_token(campaign_data):
    data = campaign_data(acceptance_rate=0.8, factors={1: 0.4, 4: 0.4})
    assert data.decision.decision == "promote"
    lever = next(lv for lv in levers(data) if lv.rule == "extend-k")
    assert "num_speculative_tokens = 4" in lever.action and "p_3 = 0.80" in lever.finding


def test_without_a_finding_the_next_level_is_measured(campaign_data):
    data = campaign_data(acceptance_rate=0.55)
    assert rules(data) == ["next-level"]
    lever = levers(data)[0]
    assert "measure ngram-k3 at concurrency 8" in lever.action
    assert "against standing at concurrency 1, 4, 8" in lever.gate and "acceptance rate >= 0.3" in lever.gate


def test_missing_results_ask_to_complete_the_bench_first(campaign_data):
    data = campaign_data(missing_trials=3, counters=counters([1600, 200, 20]))  # ngram-k3 has no trial at c4
    found = levers(data)
    assert found[0].rule == "missing-trials" and found[0].evidence == (f"{CANDIDATE}@c4",)
    assert "3 declared trial(s) have no results: ngram-k3@c4 0/3" in found[0].finding
    assert f"specdec request bench {RUN}" in found[0].action
    assert "win-vanishes" not in [lv.rule for lv in found]  # nothing was measured at c4 to vanish


def test_too_few_trials_per_arm_ask_for_what_the_gate_needs(campaign_data):
    data = campaign_data(trials=2, exploratory=True)
    lever = levers(data)[0]
    assert lever.rule == "too-few-trials"
    assert "4 arm(s) declare fewer trials than the gate's 3 per arm" in lever.finding
    assert "re-bench with 3 trials per arm" in lever.action and "at least 3 trials per arm" in lever.gate
