"""The gate's decision at one concurrency level of one candidate (services.gate.decide assembles them).

A level is `win`, `reject`, `inconclusive` or, with a cap on trials, `continue` (docs/gate.md#decision-rules).
The objective and every guard are compared by one statistics path (`_compare_metric`, stats.compare), under
the decision's `Design`: its alpha, minimum effect, measured server bias and looks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contracts.artifacts.decision import GuardCheck, Interval, LevelDecision, MetricComparison
from contracts.artifacts.trials import MetricKey, Trial, trial_value
from contracts.campaign import GateSpec
from services.gate import checks
from services.gate.stats import MIN_TRIALS_FOR_NOISE, VERDICT_NAMES, compare
from services.shared import sequential
from services.shared.formatting import number

INTERVAL_METHOD = "Welch t-interval on log per-trial figures (trials are the independent units), exponentiated"
SEQUENTIAL_METHOD = (
    "Welch t repeated confidence interval on log per-trial figures, exponentiated: looks at {first}..{cap} "
    "trials per arm, Hwang-Shih-DeCani alpha spending (gamma {gamma:g}) on each side, each look's nominal level "
    "read at its Welch degrees of freedom"
)

Level = int | None


@dataclass(frozen=True)
class Design:
    """The statistics of one decision: the candidate's alpha (two-sided, Bonferroni-split), the minimum
    effect and the measured server bias (relative), the first look and the cap (None: one look)."""

    alpha: float
    min_effect: float
    bias: float
    first: int
    cap: int | None

    def method(self) -> str:
        if self.cap is None:
            return INTERVAL_METHOD + (
                f", widened by a measured server bias of {100 * self.bias:g} %" if self.bias else ""
            )
        text = SEQUENTIAL_METHOD.format(first=self.first, cap=self.cap, gamma=sequential.SPENDING_GAMMA)
        return text + (f", widened by a measured server bias of {100 * self.bias:g} %" if self.bias else "")


def decide_level(
    level: Level,
    base: list[Trial],
    cand: list[Trial],
    *,
    keys: list[MetricKey],
    guards: list[tuple[str, MetricKey]],
    spec: GateSpec,
    design: Design,
    accuracy: float | None,
    base_rejected: list[checks.Rejected],
    cand_rejected: list[checks.Rejected],
    failed: str | None = None,
) -> LevelDecision:
    base, cand = sorted(base, key=checks.trial_order), sorted(cand, key=checks.trial_order)
    base_counts, cand_counts = checks.arm_counts(base), checks.arm_counts(cand)
    too_few = [
        *checks.count_problems("baseline", base_counts, design.first),
        *checks.count_problems("candidate", cand_counts, design.first),
    ]
    problems = [
        *checks.rejected_problems("baseline", base_rejected),
        *checks.rejected_problems("candidate", cand_rejected),
        *too_few,
        *checks.arm_problems("baseline", base, {r.index for r in base_rejected if r.index is not None}),
        *checks.arm_problems("candidate", cand, {r.index for r in cand_rejected if r.index is not None}),
    ]
    identity, unchecked = checks.identity_problems(base, cand)
    problems += identity
    floors, floor_problems = checks.floor_checks(
        cand,
        acceptance_floor=spec.acceptance_floor,
        acceptance_length_floor=spec.acceptance_length_floor,
        accuracy_floor=spec.accuracy_floor,
        accuracy=accuracy,
    )
    problems += floor_problems
    metrics = [_compare_metric(key, base, cand, design) for key in keys] if base and cand else []
    objective = metrics[0] if metrics else None
    guarded = _guard_checks(guards, metrics, base, cand, design=design) if base and cand else []
    worse_guards = [g for g in guarded if g.passed is False]
    unread_guards = [g for g in guarded if g.passed is None]
    used = min(len(base), len(cand))
    # More trials can mend too few trials or an undecided interval, nothing else; a cell the bench measured
    # no more (it failed) gets none, whatever the cap.
    may_continue = design.cap is not None and used < design.cap and failed is None
    at_end = "bench_failed" if failed is not None else "cap"

    failed_floors = [f for f in floors if f.passed is False]
    reasons = [f"{f.floor} {f.measured:.3f} is below the floor {f.minimum:.3f}" for f in failed_floors]
    stopped: str | None
    if failed_floors:
        outcome, stopped = "reject", "floor_failed"
    elif problems:
        only_few = len(problems) == len(too_few)
        outcome, stopped = ("continue", None) if only_few and may_continue else (
            "inconclusive", at_end if only_few or failed is not None else "data_problem")
    elif objective is None or objective.verdict == "unavailable":
        outcome, stopped = "inconclusive", "data_problem"
        problems.append(f"the objective could not be compared: {objective.note if objective else 'no trials'}")
    elif objective.verdict == "worse" or worse_guards:
        outcome, stopped = "reject", "decided"
    elif unread_guards:
        outcome, stopped = "inconclusive", "data_problem"
    elif objective.verdict == "better":
        outcome, stopped = "win", "decided"
    elif _within_min_effect(objective, design.min_effect):
        outcome, stopped = "inconclusive", "decided"
        bound = number(100 * design.min_effect, "g")
        problems.append(f"no change that matters: the objective's whole interval lies within +-{bound} % "
                        "(the minimum effect), and more trials would not show one")
    elif may_continue:
        outcome, stopped = "continue", None
    else:
        outcome, stopped = "inconclusive", at_end
    if stopped == "bench_failed":
        problems.append(f"the bench measured this cell no more: {failed}")
    reasons += problems
    if objective is not None and objective.verdict != "unavailable":
        reasons.append(_describe(objective))
    by_guard = ", so the candidate is rejected" if outcome == "reject" and not failed_floors else ""
    reasons += [f"guard {g.guard} is worse beyond the noise{by_guard}: {_describe(g.comparison)}" for g in worse_guards]
    reasons += [f"guard {g.guard} could not be compared, so the candidate cannot be shown not to worsen it: "
                f"{g.comparison.note}" for g in unread_guards]
    reasons += [f"guard {g.guard} not worse: {_describe(g.comparison)}" for g in guarded if g.passed]
    reasons += [f"{f.floor} {f.measured:.3f} meets the floor {f.minimum:.3f}" for f in floors if f.passed]
    guard_names = {g.comparison.metric for g in guarded}
    reasons += [f"not the objective, noted: {_describe(m)}" for m in metrics[1:]
                if m.verdict == "worse" and m.metric not in guard_names]
    expected = 0 if stopped is not None else _expected_more(objective, used, design)
    if stopped is not None:
        reasons.append(f"stopped ({stopped}) at {used} trial(s) per arm")
    return LevelDecision(
        concurrency=level,
        outcome=outcome,
        objective=objective,
        metrics=metrics,
        floors=floors,
        guards=guarded,
        baseline=base_counts,
        candidate=cand_counts,
        unchecked_identity_fields=unchecked,
        reasons=reasons or ["no reason recorded"],
        trials_used=used,
        stopped=stopped,
        trials_expected_more=expected,
    )


def _within_min_effect(m: MetricComparison, min_effect: float) -> bool:
    """The interval lies within +-min_effect: no change that matters, whatever more trials show."""
    assert m.interval is not None
    return m.interval.low_pct >= -100 * min_effect and m.interval.high_pct <= 100 * min_effect


def _expected_more(objective: MetricComparison | None, used: int, design: Design) -> int | None:
    """More trials per arm this level is expected to need, from its estimate and spread as they stand."""
    assert design.cap is not None
    if objective is None or objective.delta_pct is None or used < MIN_TRIALS_FOR_NOISE:
        return max(design.first - used, 1)
    logs = [np.log(objective.baseline_trial_values), np.log(objective.candidate_trial_values)]
    dof = sum(len(v) - 1 for v in logs)
    spread = float(np.sqrt(sum(float(np.sum((v - v.mean()) ** 2)) for v in logs) / dof))
    at = sequential.trials_expected(
        float(np.log1p(objective.delta_pct / 100)), spread, n=used + 1,
        higher_is_better=objective.direction == "higher_is_better", alpha=design.alpha / 2,
        min_effect=design.min_effect, first=design.first, cap=design.cap, bias=design.bias,
    )
    return None if at is None else at - used


def _compare_metric(key: MetricKey, base: list[Trial], cand: list[Trial], design: Design) -> MetricComparison:
    b_vals = [trial_value(t, key) for t in base]
    c_vals = [trial_value(t, key) for t in cand]
    b_have = [v for v in b_vals if v is not None]
    c_have = [v for v in c_vals if v is not None]
    common = dict(
        metric=key.name,
        direction=key.direction,
        unit=key.unit,
        baseline_trial_values=b_have,
        candidate_trial_values=c_have,
        baseline_trials=len(b_have),
        candidate_trials=len(c_have),
        min_effect_pct=100 * design.min_effect,
    )
    missing = [t.source for t, v in [*zip(base, b_vals, strict=True), *zip(cand, c_vals, strict=True)] if v is None]
    note = None
    if missing:
        note = f"{key.name} missing in {len(missing)} trial file(s), e.g. {missing[0]}"
    elif min(len(b_have), len(c_have)) < MIN_TRIALS_FOR_NOISE:
        note = f"fewer than {MIN_TRIALS_FOR_NOISE} trials in an arm: trial-to-trial noise unknown"
    elif min(b_have + c_have) <= 0:
        note = f"{key.name} is zero in some trial: a ratio is undefined"
    if note:
        return MetricComparison(
            **common, baseline_value=None, candidate_value=None, delta_pct=None, interval=None,
            noise_bound_pct=None, verdict="unavailable", note=note,
        )  # fmt: skip
    cmp = compare(np.array(b_have), np.array(c_have), higher_is_better=key.higher_is_better, alpha=design.alpha,
                  min_effect=design.min_effect, first=design.first, cap=design.cap, bias=design.bias)
    return MetricComparison(
        **common,
        baseline_value=float(cmp.baseline_center),
        candidate_value=float(cmp.candidate_center),
        delta_pct=100 * (float(cmp.ratio) - 1),
        interval=Interval(
            low_pct=100 * (float(cmp.ratio_low) - 1),
            high_pct=100 * (float(cmp.ratio_high) - 1),
            confidence=1 - design.alpha,
            method=design.method(),
        ),
        noise_bound_pct=100 * float(cmp.noise_bound),
        verdict=VERDICT_NAMES[int(cmp.verdict)],
    )


def _guard_checks(
    guards: list[tuple[str, MetricKey]], metrics: list[MetricComparison], base: list[Trial], cand: list[Trial],
    *, design: Design,
) -> list[GuardCheck]:
    """Each guard compared like the objective: the reported metric's comparison where it is one
    (same key, same alpha), else a comparison of its own (e.g. ttft:p99)."""
    by_name = {m.metric: m for m in metrics}
    found: list[GuardCheck] = []
    for text, key in guards:
        m = by_name.get(key.name) or _compare_metric(key, base, cand, design)
        passed = None if m.verdict == "unavailable" else m.verdict != "worse"
        found.append(GuardCheck(guard=text, passed=passed, comparison=m))
    return found


def _describe(m: MetricComparison) -> str:
    assert m.interval is not None and m.delta_pct is not None and m.noise_bound_pct is not None
    return (
        f"{m.metric}: candidate {m.candidate_value:.4g} vs baseline {m.baseline_value:.4g} {m.unit}, "
        f"{m.delta_pct:+.1f} % (interval {m.interval.low_pct:+.1f} % to {m.interval.high_pct:+.1f} % at "
        f"{m.interval.confidence:.1%}; minimum effect {m.min_effect_pct or 0:g} %; noise bound "
        f"{m.noise_bound_pct:.1f} % (reported); {m.baseline_trials} vs {m.candidate_trials} trials): "
        f"{m.verdict.replace('_', ' ')}"
    )
