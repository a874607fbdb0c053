"""The gate's statistics: one verdict per comparison, vectorised over campaigns.

The unit of independence is the trial (its requests share a server, a cache and a moment, so their noise
is correlated): each trial is reduced to one figure and the arms are compared as two small samples, with
the shared sequential rule (services/shared/sequential.py) that the bench-runner's rounds apply too. The
noise bound is reported, no longer a threshold (docs/gate.md#statistics)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contracts.campaign import DEFAULT_MIN_EFFECT_PCT
from services.shared import sequential

CONFIDENCE = 0.95  # family-wise over the candidates of a campaign (Bonferroni, see decide.py)
MIN_TRIALS_FOR_NOISE = 2  # fewer trials in an arm leave its trial-to-trial variance unknown

BETTER, WITHIN_NOISE, WORSE = 1, 0, -1
VERDICT_NAMES = {BETTER: "better", WITHIN_NOISE: "within_noise", WORSE: "worse"}


@dataclass(frozen=True)
class Comparison:
    """Arrays over the leading axes of the inputs (scalars as 0-d arrays for one comparison)."""

    baseline_center: np.ndarray  # geometric mean of the baseline's per-trial figures
    candidate_center: np.ndarray  # geometric mean of the candidate's per-trial figures
    ratio: np.ndarray  # candidate_center / baseline_center
    ratio_low: np.ndarray  # lower end of the ratio's interval
    ratio_high: np.ndarray  # upper end of the ratio's interval
    noise_bound: np.ndarray  # relative, e.g. 0.04 for 4 % (reported, not a threshold)
    verdict: np.ndarray  # BETTER, WITHIN_NOISE or WORSE (int8)
    settled: np.ndarray  # True where the look decided: better, worse, or within +-min_effect (bool)
    spread: np.ndarray  # pooled sd of the arms' log per-trial figures (for the trials still expected)


def relative_spread(values: np.ndarray) -> np.ndarray:
    """Mean |difference| between two trials of one arm, over its median; last axis = trials.

    Every pair of an arm's trials is one A/A comparison; this is their mean
    (Gini's mean difference), relative. n >= 2 trials.
    """
    values = np.asarray(values, dtype=float)
    n = values.shape[-1]
    pairwise = np.abs(values[..., :, None] - values[..., None, :]).sum(axis=(-2, -1)) / (n * (n - 1))
    return pairwise / np.median(values, axis=-1)


def compare(
    baseline: np.ndarray,
    candidate: np.ndarray,
    *,
    higher_is_better: bool,
    alpha: float = 1 - CONFIDENCE,
    min_effect: float = DEFAULT_MIN_EFFECT_PCT / 100,
    first: int = MIN_TRIALS_FOR_NOISE,
    cap: int | None = None,
    bias: float = 0.0,
) -> Comparison:
    """Compare per-trial figures; the last axis holds the trials of one arm.

    alpha: the two-sided interval's miss rate (alpha / 2 on each side, spent over the
    looks n = first .. cap when a cap is given). min_effect, bias: relative (0.01 for 1 %).
    Invariants the caller guarantees: every figure is finite and > 0 (a ratio of
    geometric means needs that), and each arm has at least 2 trials.
    """
    base = np.asarray(baseline, dtype=float)
    cand = np.asarray(candidate, dtype=float)
    nb, nc = base.shape[-1], cand.shape[-1]
    if min(nb, nc) < MIN_TRIALS_FOR_NOISE:
        raise ValueError(f"each arm needs at least {MIN_TRIALS_FOR_NOISE} trials, got {nb} and {nc}")
    if not (np.all(np.isfinite(base)) and np.all(np.isfinite(cand)) and np.all(base > 0) and np.all(cand > 0)):
        raise ValueError("per-trial figures must be finite and positive")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    seen = sequential.look(base, cand, higher_is_better=higher_is_better, alpha=alpha / 2, min_effect=min_effect,
                           first=first, cap=cap, bias=bias)
    verdict = np.where(seen.verdict == sequential.BETTER, BETTER,
                       np.where(seen.verdict == sequential.WORSE, WORSE, WITHIN_NOISE)).astype(np.int8)
    lb, lc = np.log(base), np.log(cand)
    pooled = np.sqrt(((nb - 1) * lb.var(axis=-1, ddof=1) + (nc - 1) * lc.var(axis=-1, ddof=1)) / (nb + nc - 2))
    return Comparison(
        baseline_center=np.exp(lb.mean(axis=-1)),
        candidate_center=np.exp(lc.mean(axis=-1)),
        ratio=np.exp(seen.estimate),
        ratio_low=np.exp(seen.low),
        ratio_high=np.exp(seen.high),
        noise_bound=np.maximum(relative_spread(base), relative_spread(cand)),
        verdict=verdict,
        settled=seen.verdict != sequential.UNDECIDED,
        spread=pooled,
    )
