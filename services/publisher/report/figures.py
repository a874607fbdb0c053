"""Figures derived from an arm's trials: spreads, pooled acceptance, predicted and realized speedup.

Pure functions of `ArmLevel`s; the report, the plots and the levers all read their numbers from here, so a
number means the same everywhere. The definitions (a_i, p_i, tau, realized, efficiency, overhead):
docs/publisher.md#predicted-and-realized-speedup."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from services.publisher.report.model import ArmLevel, CampaignData, TrialFigures

METRICS: tuple[tuple[str, str, str], ...] = (
    ("ttft_ms", "TTFT", "ms"),
    ("tpot_ms", "TPOT", "ms"),
    ("itl_ms", "ITL", "ms"),
)


@dataclass(frozen=True)
class Spread:
    """One figure over an arm's trials: each trial's value, their geometric mean, min and max."""

    values: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        # Geometric mean: the gate averages per-trial figures the same way.
        return math.exp(sum(math.log(v) for v in self.values) / self.n)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)


def spread(trials: Sequence[TrialFigures], attr: str) -> Spread | None:
    """The per-trial values of `attr` (e.g. tpot_ms); None when no trial has a positive one."""
    values = tuple(v for t in trials if (v := getattr(t, attr)) is not None and v > 0)
    return Spread(values) if values else None


@dataclass(frozen=True)
class Acceptance:
    """Spec-decode counters pooled over an arm's trials."""

    drafts: int
    draft_tokens: int
    accepted: int
    per_position: tuple[float, ...]  # a_i, i = 1..k

    @property
    def k(self) -> int:
        return len(self.per_position)

    @property
    def rate(self) -> float:
        return self.accepted / self.draft_tokens if self.draft_tokens else 0.0

    @property
    def mean_length(self) -> float:
        return 1 + self.accepted / self.drafts

    @property
    def conditional(self) -> tuple[float, ...]:
        """p_i: acceptance at position i given position i-1 was accepted (0 after a position nothing reached)."""
        out, previous = [], 1.0
        for a in self.per_position:
            out.append(a / previous if previous > 0 else 0.0)
            previous = a
        return tuple(out)


def acceptance(arm: ArmLevel) -> Acceptance | None:
    """Counters summed over the arm's trials; None when no trial proposed a draft."""
    counters = [t.spec_decode for t in arm.trials if t.spec_decode is not None and t.spec_decode.num_drafts > 0]
    if not counters:
        return None
    k = max(len(c.accepted_per_position) for c in counters)
    per_pos = [0] * k
    for c in counters:
        for i, n in enumerate(c.accepted_per_position):
            per_pos[i] += n
    drafts = sum(c.num_drafts for c in counters)
    return Acceptance(
        drafts=drafts,
        draft_tokens=sum(c.num_draft_tokens for c in counters),
        accepted=sum(c.num_accepted_tokens for c in counters),
        per_position=tuple(n / drafts for n in per_pos),
    )


@dataclass(frozen=True)
class Speedup:
    """Predicted (from acceptance) against realized (from TPOT) speedup of one candidate at one level."""

    candidate: ArmLevel
    baseline: ArmLevel
    predicted: float
    realized: float

    @property
    def efficiency(self) -> float:
        return self.realized / self.predicted

    @property
    def overhead(self) -> float:
        return self.predicted / self.realized - 1


def baseline_of(data: CampaignData, arm: ArmLevel) -> ArmLevel | None:
    """The named baseline's arm at the same concurrency level."""
    if arm.role != "candidate" or arm.baseline_cell_id is None:
        return None
    base = data.arm(arm.baseline_cell_id, arm.concurrency)
    return base if base is not None and base.trials else None


def speedup(data: CampaignData, arm: ArmLevel) -> Speedup | None:
    base = baseline_of(data, arm)
    acc = acceptance(arm)
    cand_tpot, base_tpot = spread(arm.trials, "tpot_ms"), spread(base.trials, "tpot_ms") if base else None
    if base is None or acc is None or cand_tpot is None or base_tpot is None:
        return None
    return Speedup(candidate=arm, baseline=base, predicted=acc.mean_length, realized=base_tpot.mean / cand_tpot.mean)


def speedups(data: CampaignData) -> list[Speedup]:
    return [s for arm in data.arms if (s := speedup(data, arm)) is not None]


def failed_share(arm: ArmLevel) -> float:
    done = sum(t.completed + t.failed for t in arm.trials)
    return sum(t.failed for t in arm.trials) / done if done else 0.0
