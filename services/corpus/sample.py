"""Stratified sampling of corpus records so the corpus matches the profile (pure: arrays in, arrays out).

Strata are (input-length bucket x content class); the target joint is the traffic's own table raked to
the profile's two marginals, and within a stratum records are taken in a seeded hash order that does not
depend on line order (docs/corpus.md#matching-the-profile)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

IPF_MAX_ITERS = 500
IPF_TOL = 1e-10
# Default-size tolerance: total variation between the corpus's stratum shares and the target's.
DEFAULT_SIZE_TV = 0.05


def priorities(keys: np.ndarray, seed: int, salt: int = 0) -> np.ndarray:
    """Uniform [0, 1) values from 64-bit record keys, the seed and a salt
    (splitmix64 finalizer): same in, same out, independent of record order.
    Different salts give independent orders (sampling vs split)."""
    mix = np.uint64((seed * 0x9E3779B97F4A7C15 + salt * 0xD1B54A32D192ED03) & 0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        z = np.asarray(keys, dtype=np.uint64) ^ mix
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def bucket_index(edges: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Index of the [edges[i], edges[i+1]) bucket of each value; values below
    the first edge go to bucket 0 and values at or above the last to the last
    bucket, so every record has a stratum."""
    idx = np.searchsorted(edges, values, side="right") - 1
    return np.clip(idx, 0, len(edges) - 2)


def rake(joint: np.ndarray, row_target: np.ndarray, col_target: np.ndarray) -> tuple[np.ndarray, float]:
    """Scale `joint` (counts, rows x cols) to the target marginals by IPF.

    Returns the target joint as fractions summing to 1 and the target mass
    that no available cell can carry (a profile row or column the traffic
    has no record for); that mass is dropped and the rest renormalized.
    Cells with zero count stay zero: there is nothing to sample there.
    """
    joint = np.asarray(joint, dtype=float)
    rows = np.asarray(row_target, dtype=float)
    cols = np.asarray(col_target, dtype=float)
    rows = rows / rows.sum() if rows.sum() > 0 else rows
    cols = cols / cols.sum() if cols.sum() > 0 else cols
    feasible_rows = joint.sum(axis=1) > 0
    feasible_cols = joint.sum(axis=0) > 0
    unreachable = float(rows[~feasible_rows].sum() + cols[~feasible_cols].sum()) / 2.0
    rows = np.where(feasible_rows, rows, 0.0)
    cols = np.where(feasible_cols, cols, 0.0)
    if rows.sum() <= 0 or cols.sum() <= 0:
        total = joint.sum()
        return (joint / total if total > 0 else joint), unreachable
    rows /= rows.sum()
    cols /= cols.sum()
    table = joint / joint.sum()
    for _ in range(IPF_MAX_ITERS):
        rs = table.sum(axis=1)
        table = table * np.divide(rows, rs, out=np.zeros_like(rs), where=rs > 0)[:, None]
        cs = table.sum(axis=0)
        table = table * np.divide(cols, cs, out=np.zeros_like(cs), where=cs > 0)[None, :]
        if np.abs(table.sum(axis=1) - rows).max() < IPF_TOL:
            break
    total = table.sum()
    return (table / total if total > 0 else table), unreachable


def max_matched_size(weights: np.ndarray, available: np.ndarray) -> int:
    """Largest N whose proportional quotas N * w fit the available counts."""
    w = np.asarray(weights, dtype=float).ravel()
    a = np.asarray(available, dtype=float).ravel()
    mask = w > 0
    if not mask.any():
        return 0
    return int(math.floor(float(np.min(a[mask] / w[mask])) + 1e-9))


def default_size(weights: np.ndarray, available: np.ndarray, tolerance: float = DEFAULT_SIZE_TV) -> int:
    """The corpus size used when none is asked for: the largest N whose
    quotas' shares stay within `tolerance` total variation of the target
    shares (bisection from the largest exactly matched size up to every
    available record; quotas past the matched size are short in scarce
    strata, so the distance grows with N)."""
    w = np.asarray(weights, dtype=float).ravel()
    a = np.asarray(available, dtype=np.int64).ravel()
    w = w / w.sum()

    def distance(n: int) -> float:
        q = allocate(w, n, a)
        return 0.5 * float(np.abs(q / q.sum() - w).sum())

    lo, hi = max(1, max_matched_size(w, a)), int(a[w > 0].sum())
    if lo >= hi:
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if distance(mid) <= tolerance:
            lo = mid
        else:
            hi = mid - 1
    return lo


def allocate(weights: np.ndarray, n: int, available: np.ndarray) -> np.ndarray:
    """Integer quotas summing to min(n, available total), proportional to
    `weights` by largest remainder; a stratum short of records gives all it
    has and its shortfall goes to the others in proportion (ties broken by
    index, so the result is deterministic)."""
    w = np.asarray(weights, dtype=float).ravel().copy()
    avail = np.asarray(available, dtype=np.int64).ravel()
    shape = np.shape(weights)
    quota = np.zeros_like(avail)
    remaining = int(min(n, int(avail[w > 0].sum())))
    open_ = (w > 0) & (avail > 0)
    while remaining > 0 and open_.any():
        ww = np.where(open_, w, 0.0)
        ideal = remaining * ww / ww.sum()
        base = np.floor(ideal).astype(np.int64)
        rest = remaining - int(base.sum())
        order = np.lexsort((np.arange(len(ww)), -(ideal - base)))
        for i in order[:rest]:
            base[i] += 1
        room = avail - quota
        give = np.minimum(base, room)
        quota += give
        remaining -= int(give.sum())
        open_ &= quota < avail
    return quota.reshape(shape)


def allocate_split(stratum_sizes: np.ndarray, share: float) -> np.ndarray:
    """Held-out records per stratum: round(share * total) in all, spread in
    proportion to the strata's sizes so the held-out split has the corpus's
    distribution too."""
    sizes = np.asarray(stratum_sizes, dtype=np.int64).ravel()
    total = int(round(share * int(sizes.sum())))
    if total <= 0:
        return np.zeros(np.shape(stratum_sizes), dtype=np.int64)
    return allocate(sizes.astype(float), total, sizes).reshape(np.shape(stratum_sizes))


def binned_ks(edges: ArrayLike, reference_counts: ArrayLike, values: ArrayLike) -> float | None:
    """Kolmogorov-Smirnov statistic between `values` and a reference given as
    a histogram, evaluated at the histogram's bin edges (the only points where
    the reference CDF is known without assuming a shape inside a bin):
    max over edges of |F_values(edge) - F_reference(edge)|, both as the share
    of mass in bins below the edge. Values outside the edges count in the
    first/last bin, as the profile's histogram counts them. None when either
    side is empty."""
    ref = np.asarray(reference_counts, dtype=float)
    vals = np.asarray(values, dtype=float)
    if ref.sum() <= 0 or vals.size == 0:
        return None
    hist = np.bincount(bucket_index(np.asarray(edges, dtype=float), vals), minlength=len(ref)).astype(float)
    cdf_ref = np.cumsum(ref) / ref.sum()
    cdf_val = np.cumsum(hist) / hist.sum()
    return float(np.abs(cdf_ref - cdf_val).max())


def total_variation(reference: dict[str, float], observed: dict[str, int]) -> float | None:
    """Total variation distance between two categorical distributions
    (0 = identical, 1 = disjoint)."""
    ref_total = sum(reference.values())
    obs_total = sum(observed.values())
    if ref_total <= 0 or obs_total <= 0:
        return None
    keys = set(reference) | set(observed)
    return 0.5 * sum(abs(reference.get(k, 0.0) / ref_total - observed.get(k, 0) / obs_total) for k in keys)
