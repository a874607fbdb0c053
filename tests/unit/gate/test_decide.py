"""Decisions on synthetic results with known truth."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from contracts.artifacts.decision import Decision
from contracts.artifacts.results import MAX_FAILED_SHARE, Evaluation
from contracts.artifacts.speculation import Window
from contracts.artifacts.trials import Trial, parse_trial
from contracts.campaign import GateSpec, SpeculativeConfig
from services.gate import (
    GateInputError,
    GateSpecError,
    ResultFileError,
    decide,
    decide_files,
    split_by_role,
)
from services.gate.checks import Rejected
from services.gate.simulate import NoiseModel, identity, spec_counters, trial_result

NGRAM = SpeculativeConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_min=2, prompt_lookup_max=4)
SPEC = GateSpec(objective="tpot", acceptance_floor=0.5)
QUIET = NoiseModel(trial_cv=0.01, request_cv=0.05)


def arm(
    seed: int,
    cell: str,
    *,
    factor: float | dict[int, float] = 1.0,
    levels: tuple[int, ...] = (1,),
    trials: int = 3,
    trial_count: int | None = None,
    acceptance: float | None = 0.6,
    k: int = 3,
    noise: NoiseModel = QUIET,
    failed: int = 0,
    with_identity: bool = True,
    evaluation: Evaluation | None = None,
    extra: dict[str, Any] | None = None,
    **overrides: Any,
) -> list[Trial]:
    """Trials of one cell; the standing cell when named 'standing' (no speculation, no counters)."""
    rng = np.random.default_rng(seed)
    standing = cell == "standing"
    out = []
    for level in levels:
        for i in range(trials):
            ident = None
            if with_identity:
                ident = identity(
                    cell,
                    concurrency=level,
                    trial=i,
                    trial_count=trial_count or trials,
                    speculative=None if standing else NGRAM,
                    baseline_cell_id=None if standing else "standing",
                    **overrides,
                )
            raw = trial_result(
                rng,
                factor=factor[level] if isinstance(factor, dict) else factor,
                concurrency=level,
                noise=noise,
                failed=failed,
                detailed=False,
                ident=ident,
                counters=None if standing or acceptance is None else spec_counters(acceptance, k),
                evaluation=evaluation,
                extra=extra,
            )
            out.append(parse_trial(raw, source=f"{cell}/c{level}/trial-{i}.json"))
    return out


def level(decision: Decision, candidate: str, concurrency: int | None = 1):
    cand = next(c for c in decision.candidates if c.candidate == candidate)
    return next(lvl for lvl in cand.levels if lvl.concurrency == concurrency)


def test_clear_win_is_promoted() -> None:
    d = decide(arm(1, "standing"), {"ngram": arm(2, "ngram", factor=0.75)}, SPEC)
    assert d.decision == "promote" and d.winner == "ngram"
    lvl = level(d, "ngram")
    assert lvl.outcome == "win" and lvl.objective is not None
    assert lvl.objective.verdict == "better" and lvl.objective.delta_pct == pytest.approx(-25, abs=3)
    assert lvl.objective.interval is not None and lvl.objective.interval.high_pct < 0
    assert lvl.floors[0].passed is True and lvl.floors[0].measured == pytest.approx(0.6, abs=1e-3)
    assert d.unchecked_identity_fields == []


def test_clear_loss_is_rejected() -> None:
    d = decide(arm(1, "standing"), {"ngram": arm(2, "ngram", factor=1.3)}, SPEC)
    assert d.decision == "reject" and d.winner is None
    assert level(d, "ngram").objective.verdict == "worse"


def test_tpot_win_below_the_acceptance_floor_is_rejected() -> None:
    d = decide(arm(1, "standing"), {"ngram": arm(2, "ngram", factor=0.7, acceptance=0.3)}, SPEC)
    lvl = level(d, "ngram")
    assert lvl.objective.verdict == "better"
    assert d.decision == "reject" and lvl.floors[0].passed is False
    assert any("below the floor" in r for r in lvl.reasons)


def test_acceptance_length_floor() -> None:
    spec = GateSpec(objective="tpot", acceptance_length_floor=2.5)
    # k=3 at acceptance 0.6 -> length 1 + 1.8 = 2.8; at 0.4 -> 2.2
    assert decide(arm(1, "standing"), {"c": arm(2, "c", factor=0.7, acceptance=0.6)}, spec).decision == "promote"
    assert decide(arm(1, "standing"), {"c": arm(2, "c", factor=0.7, acceptance=0.4)}, spec).decision == "reject"


def test_noisy_data_is_inconclusive() -> None:
    noisy = NoiseModel(trial_cv=0.30, request_cv=0.30)
    d = decide(arm(1, "standing", noise=noisy), {"ngram": arm(2, "ngram", factor=0.9, noise=noisy)}, SPEC)
    assert d.decision == "inconclusive"
    obj = level(d, "ngram").objective
    assert obj is not None and obj.verdict == "within_noise"
    assert obj.interval is not None and obj.interval.low_pct < 0 < obj.interval.high_pct


@pytest.mark.parametrize(("failed", "expected"), [(0, "promote"), (1, "inconclusive"), (10, "inconclusive")])
def test_failed_requests_above_the_threshold_are_inconclusive(failed: int, expected: str) -> None:
    # 3 trials x 64 requests: one failure per trial is 1.5 %, above the 1 % threshold.
    assert 1 / 65 > MAX_FAILED_SHARE
    d = decide(arm(1, "standing"), {"ngram": arm(2, "ngram", factor=0.7, failed=failed)}, SPEC)
    assert d.decision == expected
    if failed:
        assert any("failed" in r and "requests" in r for r in level(d, "ngram").reasons)


def test_several_candidates_at_several_levels() -> None:
    levels = (1, 4, 16)
    base = arm(1, "standing", levels=levels)
    candidates = {
        "strong": arm(2, "strong", levels=levels, factor=0.7),
        "steady": arm(3, "steady", levels=levels, factor=0.85),
        "fading": arm(4, "fading", levels=levels, factor={1: 0.7, 4: 0.8, 16: 1.0}),
        "costly": arm(5, "costly", levels=levels, factor={1: 0.8, 4: 1.0, 16: 1.3}),
    }
    d = decide(base, candidates, SPEC)
    assert d.decision == "promote" and d.winner == "strong"
    by_name = {c.candidate: c for c in d.candidates}
    assert by_name["strong"].outcome == by_name["steady"].outcome == "win"
    assert by_name["strong"].worst_gain_pct > by_name["steady"].worst_gain_pct  # type: ignore[operator]  # both win: both have a gain
    assert by_name["fading"].outcome == "inconclusive" and by_name["fading"].stops_paying_at == 16
    assert by_name["costly"].outcome == "reject" and by_name["costly"].stops_paying_at == 4
    assert [c.candidate for c in d.candidates] == ["strong", "steady", "fading", "costly"]
    assert d.thresholds.per_candidate_confidence == pytest.approx(1 - 0.05 / 4)
    assert [lvl.concurrency for lvl in by_name["strong"].levels] == [1, 4, 16]


def test_every_candidate_rejected_rejects_the_campaign() -> None:
    d = decide(arm(1, "standing"), {"a": arm(2, "a", factor=1.3), "b": arm(3, "b", factor=0.7, acceptance=0.1)}, SPEC)
    assert d.decision == "reject"


def test_plain_vllm_files_are_accepted_and_unchecked_identity_listed() -> None:
    base = arm(1, "standing", with_identity=False)
    cand = arm(2, "ngram", factor=0.7, with_identity=False)
    d = decide(base, {"ngram": cand}, SPEC)
    assert d.decision == "promote"
    assert set(d.unchecked_identity_fields) == {
        "hardware", "quantization", "parallelism", "workload_shape", "regime", "graph_mode", "source_revision", "node",
    }  # fmt: skip
    assert any("identity not checked" in r for r in d.reasons)


def test_plain_files_without_counters_leave_the_floor_unread() -> None:
    d = decide(
        arm(1, "standing", with_identity=False),
        {"c": arm(2, "c", factor=0.7, with_identity=False, acceptance=None)},
        SPEC,
    )
    lvl = level(d, "c")
    assert d.decision == "inconclusive" and lvl.floors[0].passed is None
    assert any("no spec-decode counters" in r for r in lvl.reasons)


def test_identity_that_differs_beyond_the_serving_config_is_inconclusive() -> None:
    d = decide(arm(1, "standing"), {"ngram": arm(2, "ngram", factor=0.7, hardware="h100")}, SPEC)
    assert d.decision == "inconclusive"
    assert any("differs between the arms in hardware" in r for r in level(d, "ngram").reasons)


def test_declared_speculation_must_show_in_the_counters() -> None:
    no_drafts = decide(arm(1, "standing"), {"c": arm(2, "c", factor=0.7, acceptance=None)}, SPEC)
    assert no_drafts.decision == "inconclusive"
    lvl = level(no_drafts, "c")
    assert any("was rejected by the gate's re-check" in r and "no spec-decode counters" in r for r in lvl.reasons)
    assert lvl.candidate.trials == 0  # none counted
    wrong_k = decide(arm(1, "standing"), {"c": arm(2, "c", factor=0.7, k=5)}, SPEC)
    assert wrong_k.decision == "inconclusive"
    assert any("5 per-position series, expected num_speculative_tokens=3" in r for r in level(wrong_k, "c").reasons)
    assert wrong_k.reasons[1].startswith("3 trial(s) rejected and not counted")


def with_counters(trials: list[Trial], which: int, **changes: Any) -> list[Trial]:
    """The trials with trial `which`'s spec-decode block changed (a hand-edited file)."""
    out = []
    for t in trials:
        if t.identity is not None and t.identity.trial == which:
            t = replace(t, spec_decode=t.spec_decode.model_copy(update=changes))  # type: ignore[union-attr]  # arm() counts drafts
        out.append(t)
    return out


def test_a_hand_edited_file_cannot_slip_through_the_gate() -> None:
    base, cand = arm(1, "standing"), arm(2, "c", factor=0.7)
    # An empty per-position list with k=3 is a problem, not a skipped check.
    d = decide(base, {"c": with_counters(cand, 1, accepted_per_position=[])}, SPEC)
    lvl = level(d, "c")
    assert d.decision == "inconclusive" and lvl.candidate.trials == 2
    assert any("trial 1 was rejected" in r and "0 per-position series" in r for r in lvl.reasons)
    # More draft tokens per draft than k.
    drafts = cand[0].spec_decode.num_drafts  # type: ignore[union-attr]  # arm() counts drafts
    d = decide(base, {"c": with_counters(cand, 0, num_draft_tokens=4 * drafts)}, SPEC)
    assert any("more than k=3" in r for r in level(d, "c").reasons)
    # The standing cell's counters moved although it declares no speculation.
    moved = [replace(t, spec_decode=cand[0].spec_decode) if t.identity.trial == 2 else t for t in base]  # type: ignore[union-attr]  # arm() gives each an identity
    d = decide(moved, {"c": cand}, SPEC)
    assert d.decision == "inconclusive"
    assert any("the baseline's trial 2 was rejected" in r and "counters moved" in r for r in level(d, "c").reasons)


def test_exact_k_for_a_draft_model_reads_the_window_and_max_model_len() -> None:
    draft = SpeculativeConfig(method="draft_model", model="/d", num_speculative_tokens=3)
    cand = arm(2, "c", factor=0.7, serving_config=identity("c", concurrency=1, trial=0).serving_config.model_copy(
        update={"speculative": draft}))
    drafts = cand[0].spec_decode.num_drafts  # type: ignore[union-attr]  # arm() counts drafts
    trimmed = [replace(t, window=Window(longest_sequence=250, longest_output=128)) for t in with_counters(
        cand, 0, num_draft_tokens=int(2.5 * drafts))]
    # Served with max_model_len 256: a request came within reach of it, vLLM may trim: counted.
    near = decide(arm(1, "standing"), {"c": trimmed}, SPEC, max_model_len=256)
    assert level(near, "c").candidate.trials == 3
    # With max_model_len 4096 nothing could trim: 2.5 draft tokens per draft is not the declared draft model.
    far = decide(arm(1, "standing"), {"c": trimmed}, SPEC, max_model_len=4096)
    assert level(far, "c").candidate.trials == 2 and far.decision == "inconclusive"
    assert any("expected exactly k=3 for draft_model" in r for r in level(far, "c").reasons)


def test_trials_the_bench_rejected_are_named_and_never_counted() -> None:
    base, cand = arm(1, "standing"), arm(2, "c", factor=0.7)
    bench_rejected = Rejected(source="bench/c/trial-2/rejected-c1.json", trial=cand[2],
                              reasons=("no drafts during the measured window",), by="the bench")
    d = decide(base, {"c": cand[:2]}, SPEC, rejected=[bench_rejected])
    lvl = level(d, "c")
    assert d.decision == "inconclusive" and lvl.candidate.trials == 2
    assert any("trial 2 was rejected by the bench and is not counted: no drafts" in r for r in lvl.reasons)
    # Not also reported as missing: it was measured, and rejected.
    assert not any("are missing" in r for r in lvl.reasons)
    assert d.reasons[1] == ("1 trial(s) rejected and not counted (their spec-decode counters contradict the declared "
                            "speculation): cell c trial 2 at concurrency 1 (rejected by the bench: no drafts during "
                            "the measured window)")
    # The floor reads the counted trials only.
    assert lvl.floors[0].source == "spec-decode counters pooled over 2 trial(s)"


def test_missing_declared_trial_is_inconclusive() -> None:
    d = decide(arm(1, "standing"), {"c": arm(2, "c", factor=0.7, trial_count=4)}, SPEC)
    assert d.decision == "inconclusive"
    assert any("trial(s) [3] are missing" in r for r in level(d, "c").reasons)


def test_too_few_trials_is_inconclusive() -> None:
    d = decide(arm(1, "standing", trials=2), {"c": arm(2, "c", factor=0.6, trials=2)}, SPEC)
    assert d.decision == "inconclusive"
    assert any("too few trials" in r for r in level(d, "c").reasons)
    # min_trials below 2 is refused in the spec; a spec built without validation is still raised to 2:
    # a single trial tells nothing about noise.
    with pytest.raises(ValueError, match="gate.min_trials 1 cannot be honoured"):
        GateSpec(objective="tpot", min_trials=1)
    unchecked = GateSpec.model_construct(objective="tpot", min_trials=1)
    one = decide(arm(1, "standing", trials=1), {"c": arm(2, "c", factor=0.6, trials=1)}, unchecked)
    assert one.decision == "inconclusive" and one.thresholds.min_trials == 2


def test_a_level_only_one_arm_measured_is_inconclusive() -> None:
    d = decide(arm(1, "standing", levels=(1, 8)), {"c": arm(2, "c", factor=0.7)}, SPEC)
    assert d.decision == "inconclusive"
    assert level(d, "c", 8).outcome == "inconclusive" and level(d, "c", 1).outcome == "win"


def test_accuracy_floor() -> None:
    spec = GateSpec(objective="tpot", acceptance_floor=0.5, accuracy_floor=0.9)
    good, bad = Evaluation(agreement_rate=0.97), Evaluation(accuracy=0.7, agreement_rate=0.99)
    assert decide(arm(1, "standing"), {"c": arm(2, "c", factor=0.7, evaluation=good)}, spec).decision == "promote"
    assert decide(arm(1, "standing"), {"c": arm(2, "c", factor=0.7, evaluation=bad)}, spec).decision == "reject"
    unmeasured = decide(arm(1, "standing"), {"c": arm(2, "c", factor=0.7)}, spec)
    assert unmeasured.decision == "inconclusive"
    assert any("no evaluation block" in r for r in level(unmeasured, "c").reasons)


def test_training_metrics_never_count() -> None:
    perfect_training = {"training_loss": 0.0, "train_accuracy": 1.0, "eval_loss": 0.0}
    d = decide(arm(1, "standing"), {"c": arm(2, "c", factor=1.0, extra=perfect_training)}, SPEC)
    assert d.decision != "promote"


def test_a_higher_is_better_metric_is_compared_in_its_direction() -> None:
    d = decide(arm(1, "standing"), {"c": arm(2, "c", factor=0.7)}, SPEC)
    throughput = next(m for m in level(d, "c").metrics if m.metric == "output_throughput")
    assert throughput.direction == "higher_is_better" and throughput.verdict == "better"
    assert throughput.delta_pct > 0


def test_p99_objective_reads_the_p99_figure() -> None:
    d = decide(arm(1, "standing"), {"c": arm(2, "c", factor=0.7)}, GateSpec(objective="tpot:p99", acceptance_floor=0.5))
    obj = level(d, "c").objective
    assert d.objective == "tpot:p99" and obj is not None and obj.metric == "tpot:p99" and obj.verdict == "better"


def test_decision_json_round_trips_with_every_metric() -> None:
    d = decide(arm(1, "standing"), {"ngram": arm(2, "ngram", factor=0.75)}, SPEC)
    assert Decision.model_validate_json(d.model_dump_json()) == d
    names = [m.metric for m in level(d, "ngram").metrics]
    assert names[0] == "tpot:median" and "ttft:median" in names and "acceptance_rate" in names


def test_bad_spec_and_inputs_are_errors() -> None:
    with pytest.raises(GateSpecError, match="needs an objective"):
        decide(arm(1, "standing"), {"c": arm(2, "c")}, GateSpec(acceptance_floor=0.5))
    with pytest.raises(GateInputError):
        decide(arm(1, "standing"), {"bad/name": arm(2, "c")}, SPEC)
    with pytest.raises(GateInputError):
        decide([], {"c": arm(2, "c")}, SPEC)


def test_split_by_role_gives_the_service_its_arms() -> None:
    trials = [*arm(1, "standing"), *arm(2, "a", factor=0.7), *arm(3, "b")]
    baseline, candidates = split_by_role(trials)
    assert {t.cell_id for t in baseline} == {"standing"} and set(candidates) == {"a", "b"}
    assert decide(baseline, candidates, SPEC).winner == "a"
    with pytest.raises(GateInputError, match="no identity block"):
        split_by_role([*trials, *arm(4, "p", with_identity=False)])
    with pytest.raises(GateInputError, match="exactly one standing cell"):
        split_by_role(arm(2, "a"))


def test_decide_files_reads_every_arm_and_refuses_bad_arms(tmp_path: Path) -> None:
    rng = np.random.default_rng(12)
    paths: dict[str, list[Path]] = {"standing": [], "ngram": []}
    for cell, factor in (("standing", 1.0), ("ngram", 0.7)):
        for i in range(3):
            ident = identity(cell, concurrency=1, trial=i, speculative=None if cell == "standing" else NGRAM,
                             baseline_cell_id=None if cell == "standing" else "standing")  # fmt: skip
            raw = trial_result(rng, factor=factor, noise=QUIET, ident=ident,
                               counters=None if cell == "standing" else spec_counters(0.6, 3))  # fmt: skip
            paths[cell].append(tmp_path / f"{cell}-{i}.json")
            paths[cell][-1].write_bytes(orjson.dumps(raw))
    d = decide_files(paths["standing"], {"ngram": paths["ngram"]}, SPEC)
    assert d.decision == "promote" and d.baseline == "standing"
    assert level(d, "ngram").candidate.files == [str(p) for p in paths["ngram"]]
    with pytest.raises(GateInputError, match="both the baseline and a candidate"):
        decide_files(paths["standing"], {"ngram": paths["standing"][:1]}, SPEC)
    with pytest.raises(GateInputError, match="no trial files"):
        decide_files(paths["standing"], {"ngram": []}, SPEC)
    with pytest.raises(ResultFileError, match="missing.json"):
        decide_files(paths["standing"], {"ngram": [tmp_path / "missing.json"]}, SPEC)


def test_a_candidate_without_speculation_has_no_acceptance_to_floor() -> None:
    # The standing config served again (an A/A check) or a serving change alone: its identity declares no
    # speculative config, so the acceptance floor is not applicable; the objective alone decides.
    again = arm(2, "standing", factor=0.7)
    again = [replace(t, identity=t.identity.model_copy(update={  # type: ignore[union-attr]  # arm() gives each an identity
                 "cell_id": "again", "role": "candidate", "baseline_cell_id": "standing"}))
             for t in again]
    d = decide(arm(1, "standing"), {"again": again}, SPEC)
    lvl = level(d, "again")
    assert [(f.floor, f.passed, f.measured) for f in lvl.floors] == [("acceptance_rate", None, None)]
    assert lvl.floors[0].source.startswith("not applicable")
    assert not any("no spec-decode counters" in r for r in lvl.reasons)
    assert d.decision == "promote" and lvl.objective.verdict == "better"
    # Trials without identity cannot say what they serve: the floor stays unread, a data problem (above).


def test_a_level_is_named_with_the_shared_concurrency_spelling() -> None:
    from services.gate.decide import _level_name

    assert (_level_name(4), _level_name(None)) == ("concurrency 4", "concurrency unlimited")
