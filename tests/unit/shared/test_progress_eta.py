"""The estimates and the rate limit behind step.progress (services/shared/progress.py), on scripted clocks."""

from __future__ import annotations

import pytest

from services.shared.progress import RateLimit, bench_eta_s, eta_s


def test_eta_is_the_pace_so_far_times_what_is_left():
    # 30 steps in 60 s: 2 s a step, 70 left.
    assert eta_s(60.0, 30, 100) == pytest.approx(140.0)
    assert eta_s(60.0, 100, 100) == 0.0
    assert eta_s(60.0, 120, 100) == 0.0  # a trainer that runs past its printed total is done, not negative


def test_eta_is_unknown_without_a_total_or_before_the_first_step():
    assert eta_s(60.0, 30, None) is None
    assert eta_s(5.0, 0, 100) is None


def test_bench_eta_adds_the_mean_window_per_window_left_and_the_mean_launch_per_launch_left():
    assert bench_eta_s([10.0, 20.0], [30.0], windows_left=4, launches_left=2) == pytest.approx(4 * 15.0 + 2 * 30.0)
    assert bench_eta_s([10.0], [], windows_left=3, launches_left=0) == pytest.approx(30.0)
    assert bench_eta_s([10.0], [5.0], windows_left=0, launches_left=0) == 0.0


def test_bench_eta_is_unknown_while_a_part_left_was_never_measured():
    assert bench_eta_s([], [30.0], windows_left=2, launches_left=0) is None
    assert bench_eta_s([10.0], [], windows_left=2, launches_left=1) is None


def test_the_rate_limit_lets_one_through_per_interval_and_the_forced_last_one_always():
    limit = RateLimit(2.0)
    clock = [100.0, 100.5, 101.9, 102.0, 102.1, 102.2, 104.5]
    allowed = [limit.allow(now) for now in clock[:6]]
    assert allowed == [True, False, False, True, False, False]
    assert limit.allow(102.3, force=True)  # the end of the work: out at once
    assert not limit.allow(104.2)  # the interval runs from the forced one
    assert limit.allow(clock[6])
