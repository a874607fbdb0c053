"""The gate's decision: per candidate and concurrency level, then over the campaign.

The per-level decision is services.gate.level's, the choice among candidates services.gate.ranking's; this
module checks the input, assembles each candidate's levels and words the campaign's decision
(docs/gate.md#decision-rules). Only measured serving figures are read, so training metrics never count,
and neither does a rejected trial."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from contracts.artifacts.decision import CandidateDecision, Decision, LevelDecision, Thresholds
from contracts.artifacts.results import MAX_FAILED_SHARE
from contracts.artifacts.trials import MetricKey, Trial
from contracts.campaign import GateSpec
from contracts.envelope import KEY_RE
from services.gate import checks, ranking
from services.gate.errors import GateInputError, GateSpecError
from services.gate.level import Design, Level, decide_level
from services.gate.metrics import parse_guards, parse_objective, reported_metrics
from services.gate.results import load_trials
from services.gate.stats import CONFIDENCE, MIN_TRIALS_FOR_NOISE
from services.shared.formatting import concurrency

CAMPAIGN_RULE = (
    "A candidate wins a concurrency level when it meets every floor, its data passes every check and the "
    "interval of its objective's change lies wholly beyond the minimum effect on the better side while no guard "
    "metric's interval lies wholly beyond it on the worse side; it wins when it wins every level and is rejected "
    "when any level rejects it. The campaign promotes the winning candidate with the largest smallest-gain over "
    "the levels, rejects when every candidate is rejected, and is inconclusive otherwise; with a cap on trials it "
    "continues while any level could still change that outcome. Intervals are Bonferroni-split over the "
    "candidates; training metrics never count."
)
SPENDING_FIXED = "none: one look at the trials at hand (no cap), the full alpha"


def decide_files(baseline: list[Path], candidates: Mapping[str, list[Path]], spec: GateSpec) -> Decision:
    """Load every trial file (ResultFileError names every unreadable one) and decide."""
    if not baseline:
        raise GateInputError("no baseline trial files: give the standing cell's result files")
    empty = [name for name, paths in candidates.items() if not paths]
    if empty or not candidates:
        raise GateInputError(
            f"no trial files for candidate(s) {empty or '(none given)'}: give each candidate's result files"
        )
    shared = {str(p) for p in baseline} & {str(p) for paths in candidates.values() for p in paths}
    if shared:
        raise GateInputError(f"file(s) in both the baseline and a candidate: {sorted(shared)}")
    names = list(candidates)
    # One load for all files so that every unreadable file is named at once.
    all_paths = [*baseline, *(p for name in names for p in candidates[name])]
    trials = load_trials(all_paths)
    by_source = dict(zip([str(p) for p in all_paths], trials, strict=True))
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
    guards = list(zip(spec.guards, parse_guards(spec.guards), strict=False))  # test_self reverts parse_guards to []
    if not baseline_trials:
        raise GateInputError("no baseline trials")
    bad_names = [name for name in candidate_trials if not KEY_RE.match(name)]
    if bad_names or not candidate_trials:
        raise GateInputError(
            f"candidate names {bad_names or '(none)'} are not usable: give at least one, each letters, digits, '_', "
            f"'.', '-'"
        )
    alpha = (1 - CONFIDENCE) / len(candidate_trials)
    min_trials = max(spec.min_trials, MIN_TRIALS_FOR_NOISE)
    if max_trials is not None and max_trials < min_trials:
        raise GateSpecError(f"max_trials {max_trials} is below min_trials {min_trials}: the cap must allow the "
                            "minimum trials per arm; raise max_trials or lower min_trials")
    design = Design(alpha=alpha, min_effect=spec.min_effect_pct / 100, bias=spec.server_bias_pct / 100,
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
        _decide_candidate(
            name,
            base_levels,
            _by_level(trials),
            keys,
            guards=guards,
            spec=spec,
            design=design,
            base_rejected=base_rejected_levels,
            cand_rejected=_rejected_by_level(set_aside[name]),
            failed=failed.get(name),
        )
        for name, trials in counted.items()
    ]
    settled = ranking.settled(decided)
    if settled:
        # The outcome is fixed: what still runs cannot change it, so it stops (moot).
        decided = [_moot(c) if c.outcome == "continue" else c for c in decided]
    decided.sort(key=ranking.rank)
    winners = [c for c in decided if c.outcome == "win"]
    reasons = [f"{c.candidate}: {c.outcome} - {c.reasons[0]}" for c in decided]
    if all_rejected:
        reasons.insert(
            0,
            f"{len(all_rejected)} trial(s) rejected and not counted (their spec-decode counters contradict "
            f"the declared speculation): " + "; ".join(r.describe() for r in all_rejected),
        )
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


def _decide_candidate(
    name: str,
    base_levels: dict[Level, list[Trial]],
    cand_levels: dict[Level, list[Trial]],
    keys: list[MetricKey],
    *, guards: list[tuple[str, MetricKey]],
    spec: GateSpec,
    design: Design,
    base_rejected: dict[Level, list[checks.Rejected]],
    cand_rejected: dict[Level, list[checks.Rejected]],
    failed: str | None = None,
) -> CandidateDecision:
    accuracies = [t.accuracy for trials in cand_levels.values() for t in trials if t.accuracy is not None]
    accuracy = float(np.mean(accuracies)) if accuracies else None
    levels = sorted(set(base_levels) | set(cand_levels) | set(base_rejected) | set(cand_rejected), key=_level_order)
    decisions = [
        decide_level(level, base_levels.get(level, []), cand_levels.get(level, []), keys=keys, guards=guards,
                     spec=spec, design=design, accuracy=accuracy, base_rejected=base_rejected.get(level, []),
                     cand_rejected=cand_rejected.get(level, []), failed=failed)
        for level in levels
    ]
    return _candidate(name, decisions, accuracy)


def _candidate(name: str, decisions: list[LevelDecision], accuracy: float | None) -> CandidateDecision:
    gains = [ranking.gain(d) for d in decisions]
    worst = None if any(g is None for g in gains) else min(gains)  # type: ignore[type-var]  # no None left
    stops = ranking.stops_paying_at(decisions)
    outcomes = [d.outcome for d in decisions]
    possible = ranking.possible([{o} if o != "continue" else set(ranking.ANY_LEVEL) for o in outcomes])
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
        outcome=outcome,
        levels=decisions,
        worst_gain_pct=worst,
        stops_paying_at=stops,
        accuracy=accuracy,
        reasons=reasons,
    )


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


def _expected_words(lvl: LevelDecision) -> str:
    more = lvl.trials_expected_more
    return "not expected to decide by the cap" if more is None else f"about {more} more trial(s) per arm expected"


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
    return f"concurrency {concurrency(level)}"


def _arm_name(trials: list[Trial], default: str) -> str:
    cells = {t.cell_id for t in trials}
    return cells.pop() if len(cells) == 1 and None not in cells else default  # type: ignore[return-value]  # None is ruled out
