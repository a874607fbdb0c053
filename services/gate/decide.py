"""The gate's decision: per candidate and concurrency level, then over the campaign.

Rules (docs/gate.md has them in full):

- A level is a `win` when every floor is met, no data check failed, no guard
  metric is `worse` or uncomparable and the (latency) objective is `better`
  (its interval clears the minimum effect); `reject` when a floor fails (the
  candidate's own counters say it does not draft well enough), or when the data
  is sound and the objective or a guard is `worse`; `inconclusive` otherwise.
  Guards are compared by the objective's own machinery (`_compare_metric`,
  stats.compare): one statistics path.
- Sequential rounds (`max_trials`): a level still undecided with fewer than
  `max_trials` trials per arm is `continue`, and so is the campaign while any
  level could still change its outcome (`_possible`); once the outcome is fixed,
  the levels it no longer depends on stop as `moot`. Without `max_trials` the
  trials at hand are the cap: one look, never `continue`.
- A candidate wins when it wins at every concurrency level; it is rejected when
  it is rejected at any level; otherwise it is inconclusive.
- The campaign promotes the winning candidate whose smallest objective gain
  over the levels is largest; it rejects when every candidate is rejected; it
  is inconclusive otherwise.
- Only measured serving figures are read (contracts.results): training metrics
  never count, whatever a file carries.
- A rejected trial never counts: the bench's (its `rejected-c<k>.json` files,
  given as `rejected`) and every trial the gate's own re-check of the
  spec-decode rule rejects (checks.recheck). Its level is inconclusive, and the
  decision's reasons say how many trials were rejected and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from contracts.campaign import GateSpec
from contracts.decision import (
    CandidateDecision,
    Decision,
    GuardCheck,
    Interval,
    LevelDecision,
    MetricComparison,
    Thresholds,
)
from contracts.envelope import KEY_RE
from contracts.results import MAX_FAILED_SHARE
from contracts.trials import MetricKey, Trial, trial_value
from services.gate import checks
from services.gate.errors import GateInputError
from services.gate.metrics import parse_guards, parse_objective, reported_metrics
from services.gate.results import load_trials
from services.gate.errors import GateSpecError
from services.gate.stats import CONFIDENCE, MIN_TRIALS_FOR_NOISE, VERDICT_NAMES, compare
from services.shared import sequential

CAMPAIGN_RULE = (
    "A candidate wins a concurrency level when it meets every floor, its data passes every check and the "
    "interval of its objective's change lies wholly beyond the minimum effect on the better side while no guard "
    "metric's interval lies wholly beyond it on the worse side; it wins when it wins every level and is rejected "
    "when any level rejects it. The campaign promotes the winning candidate with the largest smallest-gain over "
    "the levels, rejects when every candidate is rejected, and is inconclusive otherwise; with a cap on trials it "
    "continues while any level could still change that outcome. Intervals are Bonferroni-split over the "
    "candidates; training metrics never count."
)
INTERVAL_METHOD = "Welch t-interval on log per-trial figures (trials are the independent units), exponentiated"
SEQUENTIAL_METHOD = (
    "Welch t repeated confidence interval on log per-trial figures, exponentiated: looks at {first}..{cap} "
    "trials per arm, Hwang-Shih-DeCani alpha spending (gamma {gamma:g}) on each side, each look's nominal level "
    "read at its Welch degrees of freedom"
)
SPENDING_FIXED = "none: one look at the trials at hand (no cap), the full alpha"

Level = int | None


def decide_files(baseline: list[Path], candidates: Mapping[str, list[Path]], spec: GateSpec) -> Decision:
    """Load every trial file (ResultFileError names every unreadable one) and decide."""
    if not baseline:
        raise GateInputError("no baseline trial files: give the standing cell's result files")
    empty = [name for name, paths in candidates.items() if not paths]
    if empty or not candidates:
        raise GateInputError(f"no trial files for candidate(s) {empty or '(none given)'}: give each candidate's result files")
    shared = {str(p) for p in baseline} & {str(p) for paths in candidates.values() for p in paths}
    if shared:
        raise GateInputError(f"file(s) in both the baseline and a candidate: {sorted(shared)}")
    names = list(candidates)
    # One load for all files so that every unreadable file is named at once.
    all_paths = [*baseline, *(p for name in names for p in candidates[name])]
    trials = load_trials(all_paths)
    by_source = dict(zip([str(p) for p in all_paths], trials))
    return decide(
        [by_source[str(p)] for p in baseline],
        {name: [by_source[str(p)] for p in candidates[name]] for name in names},
        spec,
    )


def split_by_role(trials: list[Trial]) -> tuple[list[Trial], dict[str, list[Trial]]]:
    """Baseline and candidates of a bench run, from the trials' identity blocks (the gate service's input)."""
    anonymous = [t.source for t in trials if t.identity is None]
    if anonymous:
        raise GateInputError(
            f"{len(anonymous)} trial file(s) carry no identity block, so their arm is unknown (e.g. {anonymous[0]}): "
            "name the arms with specdec gate --baseline/--candidate"
        )
    baseline = [t for t in trials if t.identity and t.identity.role == "standing"]
    cells = sorted({t.cell_id for t in baseline if t.cell_id})
    if len(cells) != 1:
        raise GateInputError(f"a bench run has exactly one standing cell; these trials have {cells or 'none'}")
    candidates: dict[str, list[Trial]] = {}
    for t in trials:
        if t.identity and t.identity.role == "candidate":
            candidates.setdefault(t.identity.cell_id, []).append(t)
    return baseline, candidates


def decide(
    baseline_trials: list[Trial],
    candidate_trials: Mapping[str, list[Trial]],
    spec: GateSpec,
    *,
    max_model_len: int | None = None,
    rejected: Sequence[checks.Rejected] = (),
    max_trials: int | None = None,
    failed_cells: Mapping[str, str] | None = None,
) -> Decision:
    """Pure: the decision over every candidate and concurrency level.

    `max_model_len`: the context length the trials were served with (the campaign's),
    for the spec-decode rule's exact-k check; None where unknown (the rule then
    bounds draft tokens per draft by k). `rejected`: trials the bench rejected.
    `max_trials`: the cap on trials per arm and level of sequential rounds; None
    (the gate's fixed-trial path) makes the trials at hand the cap. `failed_cells`: candidates (by
    name or cell) the bench measured no more, with why: their levels stop (`bench_failed`), never
    `continue`, since no round will add to them."""
    objective = parse_objective(spec.objective)
    guards = list(zip(spec.guards, parse_guards(spec.guards)))
    if not baseline_trials:
        raise GateInputError("no baseline trials")
    bad_names = [name for name in candidate_trials if not KEY_RE.match(name)]
    if bad_names or not candidate_trials:
        raise GateInputError(
            f"candidate names {bad_names or '(none)'} are not usable: give at least one, each letters, digits, '_', '.', '-'"
        )
    alpha = (1 - CONFIDENCE) / len(candidate_trials)
    min_trials = max(spec.min_trials, MIN_TRIALS_FOR_NOISE)
    if max_trials is not None and max_trials < min_trials:
        raise GateSpecError(f"max_trials {max_trials} is below min_trials {min_trials}: the cap must allow the "
                            "minimum trials per arm; raise max_trials or lower min_trials")
    design = _Design(alpha=alpha, min_effect=spec.min_effect_pct / 100, bias=spec.server_bias_pct / 100,
                     first=min_trials, cap=max_trials)
    counted_base, base_rejected = checks.recheck(baseline_trials, max_model_len)
    counted: dict[str, list[Trial]] = {}
    set_aside: dict[str, list[checks.Rejected]] = {}
    for name, trials in candidate_trials.items():
        counted[name], set_aside[name] = checks.recheck(trials, max_model_len)
    # Every trial not counted: the bench's first, then the re-check's.
    all_rejected = [*rejected, *base_rejected, *(r for rs in set_aside.values() for r in rs)]
    base_rejected += _assign(rejected, baseline_trials, candidate_trials, set_aside)
    base_levels = _by_level(counted_base)
    base_rejected_levels = _rejected_by_level(base_rejected)
    keys = reported_metrics(objective)
    failed = _failed(failed_cells or {}, candidate_trials)
    decided = [
        _decide_candidate(name, base_levels, _by_level(trials), keys, guards, spec, design,
                          base_rejected_levels, _rejected_by_level(set_aside[name]), failed.get(name))
        for name, trials in counted.items()
    ]
    settled = _settled(decided)
    if settled:
        # The outcome is fixed: what still runs cannot change it, so it stops (moot).
        decided = [_moot(c) if c.outcome == "continue" else c for c in decided]
    decided.sort(key=_rank)
    winners = [c for c in decided if c.outcome == "win"]
    reasons = [f"{c.candidate}: {c.outcome} - {c.reasons[0]}" for c in decided]
    if all_rejected:
        reasons.insert(0, f"{len(all_rejected)} trial(s) rejected and not counted (their spec-decode counters contradict "
                          f"the declared speculation): " + "; ".join(r.describe() for r in all_rejected))
    if not settled:
        outcome, winner = "continue", None
        open_levels = [f"{c.candidate} at {_level_name(lvl.concurrency)} ({_expected_words(lvl)})"
                       for c in decided for lvl in c.levels if lvl.outcome == "continue"]
        head = (f"continue: more trials (at most {max_trials} per arm) could still change the outcome at "
                + "; ".join(open_levels))
    elif winners:
        outcome, winner = "promote", winners[0].candidate
        head = f"promote {winner}: it wins at every concurrency level"
        if len(winners) > 1:
            head += f" and has the largest smallest-gain ({winners[0].worst_gain_pct:+.1f} %) of {len(winners)} winners"
    elif all(c.outcome == "reject" for c in decided):
        outcome, winner, head = "reject", None, "reject: every candidate was rejected"
    else:
        outcome, winner = "inconclusive", None
        head = "inconclusive: no candidate wins at every concurrency level, and not every candidate was rejected"
    unchecked = sorted({f for c in decided for lvl in c.levels for f in lvl.unchecked_identity_fields})
    if unchecked:
        reasons.append(f"identity not checked (files without specdec's identity block): {', '.join(unchecked)}")
    return Decision(
        decision=outcome,
        winner=winner,
        objective=objective.name,
        direction=objective.direction,
        gate=spec,
        thresholds=Thresholds(
            confidence=CONFIDENCE,
            per_candidate_confidence=1 - alpha,
            min_trials=min_trials,
            max_failed_share=MAX_FAILED_SHARE,
            min_effect_pct=spec.min_effect_pct,
            server_bias_pct=spec.server_bias_pct,
            max_trials=max_trials,
            spending=design.method() if max_trials is not None else SPENDING_FIXED,
        ),
        campaign_rule=CAMPAIGN_RULE,
        baseline=_arm_name(baseline_trials, "baseline"),
        candidates=decided,
        unchecked_identity_fields=unchecked,
        reasons=[head, *reasons],
    )


@dataclass(frozen=True)
class _Design:
    """The statistics of one decision: the candidate's alpha (two-sided, Bonferroni-split), the minimum
    effect and the measured server bias (relative), the first look and the cap (None: one look)."""

    alpha: float
    min_effect: float
    bias: float
    first: int
    cap: int | None

    def method(self) -> str:
        if self.cap is None:
            return INTERVAL_METHOD + (f", widened by a measured server bias of {100 * self.bias:g} %" if self.bias else "")
        text = SEQUENTIAL_METHOD.format(first=self.first, cap=self.cap, gamma=sequential.SPENDING_GAMMA)
        return text + (f", widened by a measured server bias of {100 * self.bias:g} %" if self.bias else "")


def _decide_candidate(
    name: str,
    base_levels: dict[Level, list[Trial]],
    cand_levels: dict[Level, list[Trial]],
    keys: list[MetricKey],
    guards: list[tuple[str, MetricKey]],
    spec: GateSpec,
    design: _Design,
    base_rejected: dict[Level, list[checks.Rejected]],
    cand_rejected: dict[Level, list[checks.Rejected]],
    failed: str | None = None,
) -> CandidateDecision:
    accuracies = [t.accuracy for trials in cand_levels.values() for t in trials if t.accuracy is not None]
    accuracy = float(np.mean(accuracies)) if accuracies else None
    levels = sorted(set(base_levels) | set(cand_levels) | set(base_rejected) | set(cand_rejected), key=_level_order)
    decisions = [
        _decide_level(level, base_levels.get(level, []), cand_levels.get(level, []), keys, guards, spec, design,
                      accuracy, base_rejected.get(level, []), cand_rejected.get(level, []), failed)
        for level in levels
    ]
    return _candidate(name, decisions, accuracy)


def _candidate(name: str, decisions: list[LevelDecision], accuracy: float | None) -> CandidateDecision:
    gains = [_gain(d) for d in decisions]
    worst = None if any(g is None for g in gains) else min(gains)  # type: ignore[type-var]
    stops = _stops_paying_at(decisions)
    outcomes = [d.outcome for d in decisions]
    possible = _possible([{o} if o != "continue" else set(_ANY_LEVEL) for o in outcomes])
    where = lambda outcome: ", ".join(_level_name(d.concurrency) for d in decisions if d.outcome == outcome)  # noqa: E731
    if len(possible) > 1:
        outcome = "continue"
        reasons = [f"continues at {where('continue')}: more trials could still change its outcome "
                   f"({' or '.join(sorted(possible))})"]
    elif "reject" in outcomes:
        outcome = "reject"
        reasons = [f"rejected at {where('reject')}"]
    elif all(o == "win" for o in outcomes):
        outcome = "win"
        reasons = [f"wins at every level ({where('win')}); smallest gain {worst:+.1f} %"]
    else:
        outcome = "inconclusive"
        reasons = [f"inconclusive at {where('inconclusive')}"]
    for d in decisions:
        reasons.extend(f"{_level_name(d.concurrency)}: {r}" for r in d.reasons)
    if stops is not None:
        reasons.append(f"speculation stops paying at concurrency {stops}: the objective is no longer better there")
    return CandidateDecision(
        candidate=name,
        outcome=outcome,  # type: ignore[arg-type]
        levels=decisions,
        worst_gain_pct=worst,
        stops_paying_at=stops,
        accuracy=accuracy,
        reasons=reasons,
    )


_ANY_LEVEL = ("win", "reject", "inconclusive")


def _possible(sets: list[set[str]]) -> set[str]:
    """The outcomes a candidate can still end in, from what each level can still end in: it wins when
    every level wins, is rejected when any level rejects, and is inconclusive otherwise."""
    found = set()
    if all("win" in s for s in sets):
        found.add("win")
    if any("reject" in s for s in sets):
        found.add("reject")
    if all(s - {"reject"} for s in sets) and any("inconclusive" in s for s in sets):
        found.add("inconclusive")
    return found


def _settled(candidates: list[CandidateDecision]) -> bool:
    """Whether no more trials can change the campaign's decision or its winner."""
    sets = [{c.outcome} if c.outcome != "continue" else _possible(
        [{lvl.outcome} if lvl.outcome != "continue" else set(_ANY_LEVEL) for lvl in c.levels]) for c in candidates]
    decisions = set()
    if any("win" in s for s in sets):
        decisions.add("promote")
    if all("reject" in s for s in sets):
        decisions.add("reject")
    if all(s - {"win"} for s in sets) and any("inconclusive" in s for s in sets):
        decisions.add("inconclusive")
    if len(decisions) != 1:
        return False
    if decisions != {"promote"}:
        return True
    # A certain winner's levels have all stopped, so its ranking figure (worst_gain_pct) is final. A candidate
    # that could still win changes the winner only if it could outrank that: its best case is the better
    # end of its objective's interval, at its worst level.
    certain = [c.worst_gain_pct for c, s in zip(candidates, sets) if s == {"win"}]
    if not certain:
        return False
    best = max(g if g is not None else -np.inf for g in certain)
    return all(_best_case_gain(c) < best for c, s in zip(candidates, sets) if "win" in s and s != {"win"})


def _best_case_gain(c: CandidateDecision) -> float:
    """The largest smallest-gain (%) the candidate could still reach, from its levels' intervals."""
    ends = []
    for lvl in c.levels:
        m = lvl.objective
        if m is None or m.interval is None:
            return np.inf
        ends.append(m.interval.high_pct if m.direction == "higher_is_better" else -m.interval.low_pct)
    return min(ends) if ends else np.inf


def _moot(c: CandidateDecision) -> CandidateDecision:
    """A candidate whose levels still run although the campaign's outcome no longer depends on them."""
    levels = [
        lvl.model_copy(update={
            "outcome": "inconclusive", "stopped": "moot", "trials_expected_more": 0,
            "reasons": [*lvl.reasons, "stopped: the campaign's outcome no longer depends on this level"],
        }) if lvl.outcome == "continue" else lvl
        for lvl in c.levels
    ]
    return _candidate(c.candidate, levels, c.accuracy)


def _decide_level(
    level: Level,
    base: list[Trial],
    cand: list[Trial],
    keys: list[MetricKey],
    guards: list[tuple[str, MetricKey]],
    spec: GateSpec,
    design: _Design,
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
    guarded = _guard_checks(guards, metrics, base, cand, design) if base and cand else []
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
        problems.append(f"no change that matters: the objective's whole interval lies within +-{_pct(design)} "
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
        outcome=outcome,  # type: ignore[arg-type]
        objective=objective,
        metrics=metrics,
        floors=floors,
        guards=guarded,
        baseline=base_counts,
        candidate=cand_counts,
        unchecked_identity_fields=unchecked,
        reasons=reasons or ["no reason recorded"],
        trials_used=used,
        stopped=stopped,  # type: ignore[arg-type]
        trials_expected_more=expected,
    )


def _pct(design: _Design) -> str:
    return f"{100 * design.min_effect:g} %"


def _within_min_effect(m: MetricComparison, min_effect: float) -> bool:
    """The interval lies within +-min_effect: no change that matters, whatever more trials show."""
    assert m.interval is not None
    return m.interval.low_pct >= -100 * min_effect and m.interval.high_pct <= 100 * min_effect


def _expected_more(objective: MetricComparison | None, used: int, design: _Design) -> int | None:
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


def _expected_words(lvl: LevelDecision) -> str:
    more = lvl.trials_expected_more
    return "not expected to decide by the cap" if more is None else f"about {more} more trial(s) per arm expected"


def _compare_metric(key: MetricKey, base: list[Trial], cand: list[Trial], design: _Design) -> MetricComparison:
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
    missing = [t.source for t, v in [*zip(base, b_vals), *zip(cand, c_vals)] if v is None]
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
        verdict=VERDICT_NAMES[int(cmp.verdict)],  # type: ignore[arg-type]
    )


def _guard_checks(
    guards: list[tuple[str, MetricKey]], metrics: list[MetricComparison], base: list[Trial], cand: list[Trial],
    design: _Design,
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


def _gain(d: LevelDecision) -> float | None:
    """Objective improvement at a level, in %, positive is better whatever the direction."""
    m = d.objective
    if m is None or m.delta_pct is None:
        return None
    return m.delta_pct if m.direction == "higher_is_better" else -m.delta_pct


def _stops_paying_at(decisions: list[LevelDecision]) -> int | None:
    paid = False
    for d in decisions:
        if d.concurrency is None:
            continue
        better = d.objective is not None and d.objective.verdict == "better"
        if paid and not better:
            return d.concurrency
        paid = paid or better
    return None


def _rank(c: CandidateDecision) -> tuple[int, float, str]:
    order = {"win": 0, "continue": 1, "inconclusive": 2, "reject": 3}[c.outcome]
    return (order, -(c.worst_gain_pct if c.worst_gain_pct is not None else -np.inf), c.candidate)


def _assign(
    rejected: Sequence[checks.Rejected],
    baseline: list[Trial],
    candidates: Mapping[str, list[Trial]],
    set_aside: dict[str, list[checks.Rejected]],
) -> list[checks.Rejected]:
    """Put each trial the bench rejected with its arm (by cell); return the baseline's.

    A candidate is found by its name (the service names candidates by cell) or by
    the cell of its trials; a rejected trial of no arm given is only counted in
    the decision's reasons."""
    base_cells = {t.cell_id for t in baseline if t.cell_id}
    cells = {name: {name} | {t.cell_id for t in trials if t.cell_id} for name, trials in candidates.items()}
    base_rejected = []
    for r in rejected:
        cell = r.trial.cell_id if r.trial is not None else None
        if cell is None:
            continue
        if cell in base_cells:
            base_rejected.append(r)
            continue
        name = next((n for n, known in cells.items() if cell in known), None)
        if name is not None:
            set_aside[name].append(r)
    return base_rejected


def _failed(failed_cells: Mapping[str, str], candidates: Mapping[str, list[Trial]]) -> dict[str, str]:
    """The candidates the bench measured no more, by name: named as given, or by the cell of their trials."""
    found = {}
    for name, trials in candidates.items():
        cells = [name, *sorted({t.cell_id for t in trials if t.cell_id})]
        why = next((failed_cells[c] for c in cells if c in failed_cells), None)
        if why is not None:
            found[name] = why
    return found


def _rejected_by_level(rejected: list[checks.Rejected]) -> dict[Level, list[checks.Rejected]]:
    levels: dict[Level, list[checks.Rejected]] = {}
    for r in rejected:
        levels.setdefault(r.concurrency, []).append(r)
    return levels


def _by_level(trials: list[Trial]) -> dict[Level, list[Trial]]:
    levels: dict[Level, list[Trial]] = {}
    for t in trials:
        levels.setdefault(t.concurrency, []).append(t)
    return levels


def _level_order(level: Level) -> tuple[int, int]:
    return (1, 0) if level is None else (0, level)


def _level_name(level: Level) -> str:
    return "unlimited concurrency" if level is None else f"concurrency {level}"


def _arm_name(trials: list[Trial], default: str) -> str:
    cells = {t.cell_id for t in trials}
    return cells.pop() if len(cells) == 1 and None not in cells else default  # type: ignore[return-value]
