"""The k that maximises predicted speedup at each measured concurrency, as vLLM's
`num_speculative_tokens_per_batch_size` schedule (contracts/campaign/schedule.py).

Pure: numbers in, numbers out. The model, its assumptions and the best fixed k are
docs/publisher.md#a-k-per-concurrency's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

EPS = 1e-9


def speedup(per_position: Sequence[float], cost: float, k: int) -> float:
    """S(k) = (1 + a_1 + ... + a_k) / (1 + k c); 1 for k = 0."""
    if k == 0:
        return 1.0
    return (1 + sum(per_position[:k])) / (1 + k * cost)


def cost_from_realized(per_position: Sequence[float], realized: float) -> float:
    """c_l from the realized speedup at the measured k: (L(k) / R - 1) / k, at least 0."""
    k = len(per_position)
    return max(0.0, ((1 + sum(per_position)) / realized - 1) / k)


def best_k(per_position: Sequence[float], cost: float) -> int:
    """The j in 0..k with the highest S(j); the smallest such j on a tie."""
    best, value = 0, 1.0
    for j in range(1, len(per_position) + 1):
        s = speedup(per_position, cost, j)
        if s > value + EPS:
            best, value = j, s
    return best


@dataclass(frozen=True)
class Level:
    """One measured level of one candidate: what the model reads."""

    concurrency: int | None  # None: no concurrency cap
    per_position: tuple[float, ...]  # a_1..a_k at this level
    cost: float  # c_l
    cost_source: str
    baseline_tpot_ms: float | None  # None: no baseline TPOT at this level

    def speedup(self, k: int) -> float:
        return speedup(self.per_position, self.cost, k)

    def tpot_ms(self, k: int) -> float | None:
        return None if self.baseline_tpot_ms is None else self.baseline_tpot_ms / self.speedup(k)


@dataclass(frozen=True)
class Plan:
    """One candidate's schedule and what it predicts against the best fixed k."""

    k_max: int
    levels: tuple[Level, ...]  # ascending concurrency, no cap last
    chosen: tuple[int, ...]  # best k per level
    fixed_k: int  # the best single k over all levels
    schedule: tuple[tuple[int, int, int], ...]

    @property
    def gain(self) -> float:
        """Geometric-mean predicted speedup of the schedule over the best fixed k (1.0: no gain)."""
        pairs = zip(self.levels, self.chosen, strict=True)
        return _geomean([lv.speedup(k) / lv.speedup(self.fixed_k) for lv, k in pairs])

    @property
    def varies(self) -> bool:
        """True when the schedule runs more than one k (otherwise it is a fixed k)."""
        return len({k for _, _, k in self.schedule}) > 1


def plan(levels: Sequence[Level]) -> Plan:
    """The schedule for one candidate from its measured levels (at least one, each with the same k_max)."""
    ordered = tuple(sorted(levels, key=lambda lv: (lv.concurrency is None, lv.concurrency or 0)))
    k_max = max(len(lv.per_position) for lv in ordered)
    chosen = tuple(best_k(lv.per_position, lv.cost) for lv in ordered)
    fixed, value = 1, -math.inf
    for j in range(1, k_max + 1):
        g = _geomean([lv.speedup(min(j, len(lv.per_position))) for lv in ordered])
        if g > value + EPS:
            fixed, value = j, g
    return Plan(k_max=k_max, levels=ordered, chosen=chosen, fixed_k=fixed,
                schedule=ranges([(lv.concurrency, k) for lv, k in zip(ordered, chosen, strict=True)]))


def ranges(choices: Sequence[tuple[int | None, int]]) -> tuple[tuple[int, int, int], ...]:
    """[(level, k)] in ascending level -> [start_bs, end_bs, k] ranges: level l covers (previous level, l];
    a level without a cap starts after the highest capped one (vLLM carries the last k on from there).
    Adjacent ranges with the same k are merged."""
    out: list[list[int]] = []
    previous = 0
    for level, k in choices:
        end = level if level is not None else previous + 1
        if end <= previous:
            continue
        if out and out[-1][2] == k:
            out[-1][1] = end
        else:
            out.append([previous + 1, end, k])
        previous = end
    return tuple((a, b, c) for a, b, c in out)


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 1.0
