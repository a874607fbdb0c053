"""The sequential stopping rule: a repeated confidence interval that shrinks as trials accumulate.

Shared by the gate (services/gate/stats.py) and the bench-runner's round controller, which applies it
after each round without a round trip to the gate. Pure (numpy + scipy, no I/O). The unit, the alpha
spending, the verdicts and the bias term are docs/gate.md#sequential-rounds's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats as st
from scipy.optimize import brentq

# Hwang-Shih-DeCani gamma: -4 is close to O'Brien-Fleming, 1 close to Pocock. Measured at a per-trial
# CV of 8 %, looks at 3..15 trials per arm, minimum effect 1 % (docs/gate.md): -4 spends too little
# early (a true 25 % gain needs 5.2 trials per arm on average), 0 and above lose power at the cap (a
# true 10 % gain promoted 81 %, 77 % at +1); -2 decides the 25 % gain in 4.6 and promotes the 10 % one 85 %.
SPENDING_GAMMA = -2.0
MIN_LOOK_TRIALS = 2  # the variance of an arm needs two trials
# The gate's family-wise confidence over the candidates of one decision (services/gate/stats.CONFIDENCE,
# kept equal by a test): the bench-runner's rounds look with the alpha the gate will decide with.
CONFIDENCE = 0.95

UNDECIDED, BETTER, WORSE, NO_EFFECT = 0, 1, -1, 2
VERDICT_NAMES = {UNDECIDED: "undecided", BETTER: "better", WORSE: "worse", NO_EFFECT: "no_effect"}


def spent(t: float | np.ndarray, alpha: float, gamma: float = SPENDING_GAMMA) -> float | np.ndarray:
    """Alpha spent by information fraction t in (0, 1] (Hwang-Shih-DeCani family)."""
    t = np.clip(t, 0.0, 1.0)
    if gamma == 0:
        return alpha * t
    return alpha * (1 - np.exp(-gamma * t)) / (1 - math.exp(-gamma))


@lru_cache(maxsize=256)
def nominal_levels(first: int, cap: int, alpha: float, gamma: float = SPENDING_GAMMA) -> tuple[float, ...]:
    """One-sided nominal levels of the looks at n = first .. cap trials per arm (information n / cap).

    Each is the level a single look's z statistic must pass so that the chance of
    crossing at any look up to it equals the alpha spent by then."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if not MIN_LOOK_TRIALS <= first <= cap:
        raise ValueError(f"looks need {MIN_LOOK_TRIALS} <= first ({first}) <= cap ({cap})")
    info = np.arange(first, cap + 1, dtype=float) / cap
    budget = np.diff(np.concatenate([[0.0], spent(info, alpha, gamma)]))
    levels: list[float] = []
    # Density of the score S = Z sqrt(I) over the continuation region, on a grid.
    grid: np.ndarray | None = None
    dens: np.ndarray | None = None
    prev_info = 0.0
    for i_k, a_k in zip(info, budget, strict=True):
        if grid is None:
            z = st.norm.isf(a_k)
            levels.append(float(a_k))
            bound = z * math.sqrt(i_k)
            grid = np.linspace(-10 * math.sqrt(i_k), bound, 801)
            dens = st.norm.pdf(grid, scale=math.sqrt(i_k))
            prev_info = i_k
            continue
        assert dens is not None
        step = math.sqrt(i_k - prev_info)
        weights = np.full(grid.size, grid[1] - grid[0])
        weights[[0, -1]] /= 2
        mass = dens * weights

        def crossing(c: float, grid: np.ndarray = grid, mass: np.ndarray = mass, step: float = step) -> float:
            return float(np.sum(mass * st.norm.sf((c - grid) / step)))

        hi = 12 * math.sqrt(i_k)
        if a_k <= crossing(hi):  # nothing left to spend at this look: a boundary no path reaches
            bound = hi
        else:
            bound = brentq(lambda c, a_k=a_k: crossing(c) - a_k, grid[0], hi, xtol=1e-10)
        levels.append(float(st.norm.sf(bound / math.sqrt(i_k))))
        new_grid = np.linspace(-10 * math.sqrt(i_k), bound, 801)
        dens = (mass[None, :] * st.norm.pdf((new_grid[:, None] - grid[None, :]) / step) / step).sum(axis=1)
        grid, prev_info = new_grid, i_k
    return tuple(levels)


def nominal_level(n: int, *, alpha: float, first: int, cap: int | None) -> float:
    """The one-sided nominal level of the look at n trials per arm; alpha itself without a cap (one look)."""
    if cap is None:
        return alpha
    first = max(min(first, cap), MIN_LOOK_TRIALS)
    return nominal_levels(first, cap, alpha)[min(max(n, first), cap) - first]


@dataclass(frozen=True)
class Look:
    """One look at two arms; arrays over the leading axes of the inputs. Log scale: log(candidate/baseline)."""

    estimate: np.ndarray  # log ratio of geometric means
    se: np.ndarray  # Welch standard error of the estimate
    df: np.ndarray  # Welch-Satterthwaite degrees of freedom
    critical: np.ndarray  # t multiplier of this look
    low: np.ndarray  # lower end of the interval (log ratio), bias term included
    high: np.ndarray  # upper end
    verdict: np.ndarray  # UNDECIDED, BETTER, WORSE or NO_EFFECT (int8)


def look(
    baseline: np.ndarray,
    candidate: np.ndarray,
    *,
    higher_is_better: bool,
    alpha: float,
    min_effect: float,
    first: int,
    cap: int | None,
    bias: float = 0.0,
) -> Look:
    """The interval and verdict after a look; the last axis holds an arm's trials (figures > 0).

    alpha: one side's budget (the interval is two-sided, alpha on each side).
    min_effect, bias: relative (0.01 for 1 %)."""
    lb, lc = np.log(np.asarray(baseline, dtype=float)), np.log(np.asarray(candidate, dtype=float))
    nb, nc = lb.shape[-1], lc.shape[-1]
    if min(nb, nc) < MIN_LOOK_TRIALS:
        raise ValueError(f"each arm needs at least {MIN_LOOK_TRIALS} trials, got {nb} and {nc}")
    if not 0 <= min_effect < 1 or bias < 0:
        raise ValueError(f"min_effect must lie in [0, 1) and bias be >= 0, got {min_effect} and {bias}")
    est = lc.mean(axis=-1) - lb.mean(axis=-1)
    vb = lb.var(axis=-1, ddof=1) / nb
    vc = lc.var(axis=-1, ddof=1) / nc
    se = np.sqrt(vb + vc)
    # Identical trials (se == 0) give a zero-width interval whatever df is: any finite df serves.
    denom = vb**2 / (nb - 1) + vc**2 / (nc - 1)
    df = np.where(denom > 0, (vb + vc) ** 2 / np.where(denom > 0, denom, 1.0), nb + nc - 2.0)
    level = nominal_level(min(nb, nc), alpha=alpha, first=first, cap=cap)
    critical = st.t.isf(level, df)
    half = critical * se + math.log1p(bias)
    low, high = est - half, est + half
    up, down = math.log1p(min_effect), math.log1p(-min_effect)
    gain_low, gain_high = (low, high) if higher_is_better else (-high, -low)
    better = gain_low > up
    worse = gain_high < down
    flat = (gain_low >= down) & (gain_high <= up)
    verdict = np.where(better, BETTER, np.where(worse, WORSE, np.where(flat, NO_EFFECT, UNDECIDED))).astype(np.int8)
    return Look(estimate=est, se=se, df=df, critical=critical, low=low, high=high, verdict=verdict)


def trials_expected(
    estimate: float, spread: float, *, n: int, higher_is_better: bool, alpha: float, min_effect: float,
    first: int, cap: int, bias: float = 0.0,
) -> int | None:
    """Trials per arm at which the look is expected to decide, if the estimate and the per-trial
    spread (sd of an arm's log figures) stay as they are; None when not by the cap.

    A projection for planning (DECISION.json's `trials_expected`), not a promise: the
    estimate moves as trials come in."""
    gain = estimate if higher_is_better else -estimate
    up, down = math.log1p(min_effect), math.log1p(-min_effect)
    for m in range(max(n, first), cap + 1):
        level = nominal_level(m, alpha=alpha, first=first, cap=cap)
        half = st.t.isf(level, 2 * m - 2) * spread * math.sqrt(2 / m) + math.log1p(bias)
        if gain - half > up or gain + half < down or (gain - half >= down and gain + half <= up):
            return m
    return None


def trials_for_min_effect(
    spread: float, *, alpha: float, min_effect: float, first: int, cap: int, bias: float = 0.0,
) -> int | None:
    """The expected trials per arm for the declared minimum effect, at a per-trial spread (sd of an
    arm's log figures): the first look at which the interval, at that spread, is no wider than the
    minimum effect on each side, so it can settle either way (a change beyond the minimum effect
    shown, or none that matters); None when not by the cap.

    The planning figure of the bench plan (`rounds.noise`, from earlier runs of the same target and
    hardware) and of the rounds' pilot (round 1's own spread, bench/rounds/look-<first>.json) that
    `specdec status` and `campaign_status` state; it depends on the noise and the minimum effect,
    not on the change measured so far (DECISION.json's `trials_expected_more` does)."""
    return trials_expected(0.0, spread, n=first, higher_is_better=False, alpha=alpha, min_effect=min_effect,
                           first=first, cap=cap, bias=bias)


def side_alpha(candidates: int) -> float:
    """One side's alpha of each candidate's interval: 95 % family-wise, Bonferroni-split over the candidates."""
    return (1 - CONFIDENCE) / candidates / 2


def pooled_spread(arms: list[list[float]]) -> float | None:
    """The per-trial spread (sd of the logs) pooled over arms of positive figures; None without two trials in an arm."""
    logs = [np.log(np.asarray(arm, dtype=float)) for arm in arms if len(arm) >= MIN_LOOK_TRIALS]
    dof = sum(v.size - 1 for v in logs)
    if not dof:
        return None
    return float(np.sqrt(sum(float(np.sum((v - v.mean()) ** 2)) for v in logs) / dof))
