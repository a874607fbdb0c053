"""The choice among candidates: what a candidate can still end in, whether the campaign's outcome is fixed,
the order that puts the winner first, and the per-level figures the ranking reads (gain, where speculation
stops paying).

Pure functions of contracts.artifacts.decision records (services.gate.decide builds them): a candidate wins when it wins
every level and is rejected when any level rejects it; the campaign promotes the winner with the largest
smallest-gain, and is settled once no more trials can change its decision or its winner.
"""

from __future__ import annotations

import numpy as np

from contracts.artifacts.decision import CandidateDecision, LevelDecision

ANY_LEVEL = ("win", "reject", "inconclusive")


def possible(sets: list[set[str]]) -> set[str]:
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


def settled(candidates: list[CandidateDecision]) -> bool:
    """Whether no more trials can change the campaign's decision or its winner."""
    sets = [{c.outcome} if c.outcome != "continue" else possible(
        [{lvl.outcome} if lvl.outcome != "continue" else set(ANY_LEVEL) for lvl in c.levels]) for c in candidates]
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
    certain = [c.worst_gain_pct for c, s in zip(candidates, sets, strict=True) if s == {"win"}]
    if not certain:
        return False
    best = max(g if g is not None else -np.inf for g in certain)
    return all(_best_case_gain(c) < best for c, s in zip(candidates, sets, strict=True) if "win" in s and s != {"win"})


def _best_case_gain(c: CandidateDecision) -> float:
    """The largest smallest-gain (%) the candidate could still reach, from its levels' intervals."""
    ends = []
    for lvl in c.levels:
        m = lvl.objective
        if m is None or m.interval is None:
            return np.inf
        ends.append(m.interval.high_pct if m.direction == "higher_is_better" else -m.interval.low_pct)
    return min(ends) if ends else np.inf


def rank(c: CandidateDecision) -> tuple[int, float, str]:
    order = {"win": 0, "continue": 1, "inconclusive": 2, "reject": 3}[c.outcome]
    return (order, -(c.worst_gain_pct if c.worst_gain_pct is not None else -np.inf), c.candidate)


def gain(d: LevelDecision) -> float | None:
    """Objective improvement at a level, in %, positive is better whatever the direction."""
    m = d.objective
    if m is None or m.delta_pct is None:
        return None
    return m.delta_pct if m.direction == "higher_is_better" else -m.delta_pct


def stops_paying_at(decisions: list[LevelDecision]) -> int | None:
    paid = False
    for d in decisions:
        if d.concurrency is None:
            continue
        better = d.objective is not None and d.objective.verdict == "better"
        if paid and not better:
            return d.concurrency
        paid = paid or better
    return None
