"""Percentiles, histograms, concurrency and the sampler."""

from __future__ import annotations

import numpy as np
import pytest

from services.profiler import stats


def test_percentiles_are_numpys_linear_interpolation():
    # Hand-computed: linear interpolation between closest ranks, rank = p/100 * (n - 1).
    s = stats.summarize(np.array([1, 2, 3, 4], dtype=np.int64))
    assert s["p50"] == pytest.approx(2.5)
    assert s["p90"] == pytest.approx(3.7)
    assert s["p99"] == pytest.approx(3.97)
    assert (s["count"], s["mean"], s["max"]) == (4, 2.5, 4)

    values = np.random.default_rng(3).integers(0, 5000, size=1001)
    s = stats.summarize(values)
    assert [s["p50"], s["p90"], s["p99"]] == pytest.approx(list(np.percentile(values, [50, 90, 99])))
    assert s["mean"] == pytest.approx(values.mean())
    assert s["max"] == values.max()


def test_summary_of_nothing_is_null_with_empty_histogram():
    s = stats.summarize(np.zeros(0, np.int64))
    assert s["count"] == 0 and s["mean"] is None and s["p99"] is None and s["max"] is None
    assert sum(b["count"] for b in s["histogram"]) == 0


def test_histogram_edges_are_lower_inclusive_upper_exclusive():
    bins = stats.histogram(np.array([0, 15, 16, 31, 32, 131071, 131072, 10**7]))
    by_lower = {b["lower"]: b["count"] for b in bins}
    assert by_lower[0] == 2 and by_lower[16] == 2 and by_lower[32] == 1
    assert by_lower[65536] == 1 and by_lower[131072] == 2
    assert bins[-1]["upper"] is None and bins[0]["upper"] == 16
    assert sum(by_lower.values()) == 8


def test_concurrency_on_hand_made_intervals():
    # [0,10) [2,4) [3,6) [10,12): peak 3 at t=3; busy time 10+2+3+2 = 17 over span 12.
    starts = np.array([0.0, 2.0, 3.0, 10.0])
    lat = np.array([10.0, 2.0, 3.0, 2.0])
    mean, peak = stats.concurrency(starts, lat)
    assert peak == 3
    assert mean == pytest.approx(17 / 12)


def test_touching_intervals_do_not_overlap_and_order_does_not_matter():
    starts = np.array([5.0, 0.0, 10.0])
    lat = np.array([5.0, 5.0, 5.0])
    mean, peak = stats.concurrency(starts, lat)
    assert peak == 1 and mean == pytest.approx(1.0)


def test_concurrency_with_gaps_and_zero_latency():
    mean, peak = stats.concurrency(np.array([0.0, 8.0]), np.array([2.0, 2.0]))
    assert peak == 1 and mean == pytest.approx(4 / 10)
    mean, peak = stats.concurrency(np.array([1.0, 1.0]), np.array([0.0, 0.0]))
    assert peak == 1 and mean == 0.0
    mean, peak = stats.concurrency(np.array([0.0, 0.0, 0.0]), np.array([1.0, 1.0, 1.0]))
    assert peak == 3 and mean == pytest.approx(3.0)


def test_arrival_rate():
    rate, why = stats.arrival_rate(np.array([0.0, 1.0, 2.0, 4.0]))
    assert rate == pytest.approx(3 / 4) and why is None
    assert stats.arrival_rate(np.array([5.0]))[0] is None
    rate, why = stats.arrival_rate(np.array([5.0, 5.0]))
    assert rate is None and "same instant" in why


def test_sampler_stays_bounded_and_spread_over_the_stream():
    sampler = stats.StrideSampler(cap=100)
    n = 50_000
    for i in range(n):
        if sampler.wants(i):
            sampler.add(i, 0, 0.0, 0.0)
    assert 50 <= len(sampler) <= 100
    index = np.frombuffer(sampler.index, dtype=np.int64)
    # Spread: every tenth of the stream holds about a tenth of the sample.
    per_decile = np.bincount(index * 10 // n, minlength=10)
    assert per_decile.min() >= len(sampler) // 10 - 3
    # Equal to what the final stride takes from scratch: thinning is consistent.
    assert list(index) == [i for i in range(n) if stats.sample_key(i) < (1 << 64) // sampler.stride]


def test_sampler_does_not_lock_onto_a_periodic_pattern():
    sampler = stats.StrideSampler(cap=2000)
    for i in range(100_000):
        if sampler.wants(i):
            sampler.add(i, 1 if i % 10 < 7 else 0, 0.0, 0.0)
    share = np.frombuffer(sampler.label, dtype=np.int8).mean()
    assert share == pytest.approx(0.7, abs=0.02)


def test_sampler_expect_skips_small_strides_and_keeps_everything_for_short_streams():
    sampler = stats.StrideSampler(cap=1000)
    sampler.expect(100_000)
    assert sampler.stride == 64  # smallest power of two with 100000 / stride <= 2 * cap
    short = stats.StrideSampler(cap=1000)
    for i in range(500):
        assert short.wants(i)
        short.add(i, 0, 0.0, 0.0)
    assert short.stride == 1 and len(short) == 500
