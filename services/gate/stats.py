"""The gate's statistics: one verdict per comparison, vectorised over campaigns.

Unit of independence: the trial. Requests within a trial share a server, a warm
cache and a moment on the machine, so their noise is correlated; treating them as
independent would make a 3-trial comparison look like a 600-sample one. Each
trial is reduced to one figure (metrics.py), and the two arms' per-trial figures
are compared as two small samples.

Two conditions make a difference real (docs/gate.md):

1. The interval. Welch's t-interval on the log of the per-trial figures gives a
   (1 - alpha) interval for log(candidate / baseline), the log of the ratio of
   geometric means; exponentiated it is an interval for the ratio. Welch because
   a candidate's trials need not vary like the baseline's; logs because latency
   noise is multiplicative. With 3 trials a bootstrap over trials has 10 distinct
   resamples and shrinks the variance by (n-1)/n, so its intervals are too narrow;
   the t-interval is exact when the log figures are normal.
2. The noise bound (A/A bound). Each arm's own trials, compared pairwise,
   are A/A comparisons: the mean absolute difference between two trials of the
   same config, relative to the arm's median, is what the config measures
   against itself. The bound is the larger of the two arms' figures; the point
   estimate must move beyond it. The mean pairwise difference estimates the same
   quantity whatever the number of trials (the range, max - min, grows with it,
   which would make 5 trials less able to show a win than 3).

better: the whole interval lies on the better side of "no change" and the
point estimate improves by more than the noise bound; worse: the mirror image;
within_noise: anything else.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as st

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
    noise_bound: np.ndarray  # relative, e.g. 0.04 for 4 %
    verdict: np.ndarray  # BETTER, WITHIN_NOISE or WORSE (int8)


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
    baseline: np.ndarray, candidate: np.ndarray, *, higher_is_better: bool, alpha: float = 1 - CONFIDENCE
) -> Comparison:
    """Compare per-trial figures; the last axis holds the trials of one arm.

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

    lb, lc = np.log(base), np.log(cand)
    diff = lc.mean(axis=-1) - lb.mean(axis=-1)
    vb = lb.var(axis=-1, ddof=1) / nb
    vc = lc.var(axis=-1, ddof=1) / nc
    se = np.sqrt(vb + vc)
    # Welch-Satterthwaite degrees of freedom; identical trials (se == 0) give a
    # zero-width interval whatever df is, so any finite df serves there.
    denom = vb**2 / (nb - 1) + vc**2 / (nc - 1)
    df = np.where(denom > 0, (vb + vc) ** 2 / np.where(denom > 0, denom, 1.0), nb + nc - 2.0)
    half = st.t.ppf(1 - alpha / 2, df) * se
    ratio = np.exp(diff)
    low, high = np.exp(diff - half), np.exp(diff + half)
    noise = np.maximum(relative_spread(base), relative_spread(cand))

    if higher_is_better:
        better = (low > 1) & (ratio - 1 > noise)
        worse = (high < 1) & (1 - ratio > noise)
    else:
        better = (high < 1) & (1 - ratio > noise)
        worse = (low > 1) & (ratio - 1 > noise)
    verdict = np.where(better, BETTER, np.where(worse, WORSE, WITHIN_NOISE)).astype(np.int8)
    return Comparison(
        baseline_center=np.exp(lb.mean(axis=-1)),
        candidate_center=np.exp(lc.mean(axis=-1)),
        ratio=ratio,
        ratio_low=low,
        ratio_high=high,
        noise_bound=noise,
        verdict=verdict,
    )
