"""The gate's statistics: interval, noise bound, verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from services.gate.stats import BETTER, WITHIN_NOISE, WORSE, compare, relative_spread


def test_identical_arms_are_within_noise() -> None:
    values = np.array([1.08, 1.10, 1.09])
    cmp = compare(values, values.copy(), higher_is_better=False)
    assert cmp.verdict == WITHIN_NOISE
    assert cmp.ratio == pytest.approx(1.0)
    assert cmp.ratio_low < 1 < cmp.ratio_high


def test_clear_latency_win_and_loss() -> None:
    base = np.array([1.08, 1.10, 1.09])
    faster = base * 0.75 * np.array([1.0, 1.01, 0.99])
    assert compare(base, faster, higher_is_better=False).verdict == BETTER
    assert compare(faster, base, higher_is_better=False).verdict == WORSE


def test_direction_flips_the_verdict() -> None:
    base = np.array([100.0, 101.0, 99.0])
    higher = base * 1.3
    assert compare(base, higher, higher_is_better=True).verdict == BETTER
    assert compare(base, higher, higher_is_better=False).verdict == WORSE


def test_interval_is_for_the_ratio_of_geometric_means() -> None:
    base = np.array([1.0, 1.1, 1.2])
    cand = np.array([0.5, 0.55, 0.6])
    cmp = compare(base, cand, higher_is_better=False)
    assert cmp.ratio == pytest.approx(0.5)
    assert cmp.baseline_center == pytest.approx(np.exp(np.log(base).mean()))
    assert cmp.ratio_low < 0.5 < cmp.ratio_high


def test_a_change_the_noise_bound_hides_is_a_win_once_the_interval_clears_the_minimum_effect() -> None:
    # 32 trials per arm pin the ratio at 0.96: the interval clears the 1 % minimum effect, although
    # the arms' pairwise spread (the old A/A bound, now only reported) is larger than the change.
    base = np.array([1.00, 1.10, 1.00, 1.10, 1.00, 1.10, 1.00, 1.10] * 4)
    cand = base * 0.96
    cmp = compare(base, cand, higher_is_better=False)
    assert cmp.ratio_high < 0.99
    assert cmp.noise_bound > 0.04
    assert cmp.verdict == BETTER


def test_a_change_inside_the_minimum_effect_is_not_a_win() -> None:
    # The interval excludes "no change" but not the declared minimum effect.
    base = np.array([1.00, 1.001, 0.999] * 10)
    cand = base * 0.995
    cmp = compare(base, cand, higher_is_better=False, min_effect=0.01)
    assert cmp.ratio_high < 1
    assert cmp.verdict == WITHIN_NOISE
    assert cmp.settled  # the whole interval lies within +-1 %: more trials would not make it a win
    assert compare(base, cand, higher_is_better=False, min_effect=0.001).verdict == BETTER


def test_a_measured_server_bias_widens_the_interval() -> None:
    base = np.array([1.00, 1.02, 0.99, 1.01])
    cand = base * 0.9
    plain = compare(base, cand, higher_is_better=False)
    biased = compare(base, cand, higher_is_better=False, bias=0.05)
    assert biased.ratio_low < plain.ratio_low and biased.ratio_high > plain.ratio_high
    assert compare(base, cand, higher_is_better=False, bias=0.12).verdict == WITHIN_NOISE


def test_a_cap_widens_the_early_looks() -> None:
    # The same 3 trials per arm, as the first look of rounds up to 15, get a wider interval than as
    # the only look: alpha is spent over every look.
    rng = np.random.default_rng(4)
    base, cand = rng.lognormal(0, 0.08, 3), rng.lognormal(-0.2, 0.08, 3)
    once = compare(base, cand, higher_is_better=False)
    first = compare(base, cand, higher_is_better=False, first=3, cap=15)
    assert first.ratio_high - first.ratio_low > once.ratio_high - once.ratio_low


def test_fewer_trials_means_a_wider_interval() -> None:
    rng = np.random.default_rng(3)
    wide = compare(rng.normal(1, 0.03, 3), rng.normal(0.9, 0.03, 3), higher_is_better=False)
    narrow = compare(rng.normal(1, 0.03, 30), rng.normal(0.9, 0.03, 30), higher_is_better=False)
    assert (wide.ratio_high - wide.ratio_low) > (narrow.ratio_high - narrow.ratio_low)


def test_vectorised_equals_one_at_a_time() -> None:
    rng = np.random.default_rng(7)
    base = rng.lognormal(0, 0.05, (50, 3))
    cand = rng.lognormal(-0.05, 0.05, (50, 4))
    batch = compare(base, cand, higher_is_better=False)
    for i in range(50):
        one = compare(base[i], cand[i], higher_is_better=False)
        assert one.verdict == batch.verdict[i]
        assert one.ratio_low == pytest.approx(batch.ratio_low[i])
        assert one.noise_bound == pytest.approx(batch.noise_bound[i])


def test_noise_bound_does_not_grow_with_the_number_of_trials() -> None:
    # The mean pairwise difference estimates the same quantity for any n (a range would grow).
    rng = np.random.default_rng(11)
    small = relative_spread(rng.lognormal(0, 0.05, (20000, 3))).mean()
    large = relative_spread(rng.lognormal(0, 0.05, (4000, 10))).mean()
    assert large == pytest.approx(small, rel=0.05)
    # E|X1 - X2| = 2 sigma / sqrt(pi) for normal noise.
    assert small == pytest.approx(2 * 0.05 / np.sqrt(np.pi), rel=0.05)


@pytest.mark.parametrize(
    ("base", "cand", "message"),
    [
        ([1.0], [1.0, 1.1], "at least 2 trials"),
        ([1.0, 0.0], [1.0, 1.1], "finite and positive"),
        ([1.0, np.nan], [1.0, 1.1], "finite and positive"),
    ],
)
def test_invalid_input_is_refused(base: list[float], cand: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compare(np.array(base), np.array(cand), higher_is_better=False)
