"""The schedule model (services/shared/schedule.py) on constructed acceptance curves whose optimum is known
by hand, and the schedule's validation and lookup (contracts/campaign/schedule.py)."""

from __future__ import annotations

import pytest

from contracts.campaign.schedule import k_at, k_span, schedule_problems
from services.shared.schedule import Level, best_k, cost_from_realized, plan, ranges, speedup

# a_i = product of p_1..p_i
RISING = (0.5, 0.45, 0.4275)  # p = 0.5, 0.9, 0.95: later positions accept more often given the earlier
FALLING = (0.6, 0.12, 0.024)  # p = 0.6, 0.2, 0.2: acceptance collapses after the first position


def level(concurrency: int | None, per_position: tuple[float, ...], cost: float, tpot: float | None = 10.0) -> Level:
    return Level(concurrency, per_position, cost, "constructed", tpot)


@pytest.mark.parametrize(("curve", "cost", "expected"), [
    (RISING, 0.0, 3),  # free drafting: every position adds tokens
    (RISING, 0.1, 3),  # S = 1.364, 1.625, 1.829
    (RISING, 0.5, 0),  # S = 1.0, 0.975, 0.951: no k beats plain decoding (a tie at k=1 goes to drafting less)
    (FALLING, 0.0, 3),  # free: even a small a_3 adds
    (FALLING, 0.2, 1),  # S = 1.333, 1.229, 1.090
    (FALLING, 0.7, 0),  # S = 0.941: speculation does not pay
])
def test_best_k_on_known_curves(curve: tuple[float, ...], cost: float, expected: int) -> None:
    assert best_k(curve, cost) == expected
    values = [speedup(curve, cost, j) for j in range(len(curve) + 1)]
    assert values[expected] == pytest.approx(max(values))


def test_speedup_is_the_reports_prediction() -> None:
    assert speedup(RISING, 0.1, 3) == pytest.approx((1 + sum(RISING)) / 1.3)
    assert speedup(RISING, 0.1, 0) == 1.0


def test_cost_from_realized_reproduces_the_realized_speedup_at_the_measured_k() -> None:
    cost = cost_from_realized(FALLING, 1.2)
    assert speedup(FALLING, cost, 3) == pytest.approx(1.2)
    assert cost_from_realized(FALLING, 5.0) == 0.0  # faster than free drafting: noise, floored at 0


def test_cost_rising_with_concurrency_shortens_k_per_level() -> None:
    """Cheap at low concurrency, costly at high: long drafts at 1, short at 4, none at 16."""
    found = plan([level(16, FALLING, 0.7), level(1, FALLING, 0.0), level(4, FALLING, 0.2)])
    assert [lv.concurrency for lv in found.levels] == [1, 4, 16]
    assert found.chosen == (3, 1, 0)
    assert found.schedule == ((1, 1, 3), (2, 4, 1), (5, 16, 0))
    assert found.varies and found.gain > 1
    assert not schedule_problems(found.schedule, found.k_max)


def test_best_fixed_k_maximises_the_geometric_mean_and_the_schedule_never_predicts_worse() -> None:
    levels = [level(1, RISING, 0.1), level(8, RISING, 0.5)]
    found = plan(levels)
    assert found.chosen == (3, 0)
    # fixed k: geomean of S at both levels, j = 1: sqrt(1.364 * 1.0), j = 3: sqrt(1.829 * 0.951)
    assert found.fixed_k == 3
    for lv, k in zip(found.levels, found.chosen, strict=True):
        assert lv.speedup(k) >= lv.speedup(found.fixed_k) - 1e-12
        assert lv.tpot_ms(k) == pytest.approx(10.0 / lv.speedup(k))


def test_same_k_everywhere_is_one_range() -> None:
    found = plan([level(1, RISING, 0.0), level(4, RISING, 0.05)])
    assert found.schedule == ((1, 4, 3),)
    assert not found.varies and found.gain == pytest.approx(1.0)


def test_ranges_without_a_cap_follow_the_highest_level() -> None:
    assert ranges([(2, 3), (None, 1)]) == ((1, 2, 3), (3, 3, 1))


@pytest.mark.parametrize(("entries", "k_max", "words"), [
    ([], 3, "empty"),
    ([[2, 4, 3]], 3, "start at batch size 1"),
    ([[1, 4, 3], [4, 8, 2]], 3, "overlaps"),
    ([[1, 4, 3], [6, 5, 2]], 3, "start_bs exceeds end_bs"),
    ([[1, 4, 4]], 3, "between 0 and num_speculative_tokens 3"),
    ([[1, 2]], 3, "is not [start_bs, end_bs, k]"),
])
def test_schedule_problems_name_the_fault(entries: list, k_max: int, words: str) -> None:
    assert any(words in p for p in schedule_problems(entries, k_max))


def test_lookup_is_vllms() -> None:
    schedule = [[1, 2, 3], [5, 8, 2], [9, 9, 0]]
    # a gap (3, 4) carries the previous k on; past the last range the last k holds
    assert [k_at(schedule, 3, bs) for bs in (1, 2, 3, 4, 5, 8, 9, 100)] == [3, 3, 3, 3, 2, 2, 0, 0]
    assert k_span(schedule, 3, 1) == (3, 3)
    assert k_span(schedule, 3, 6) == (2, 3)
    assert k_span(schedule, 3, None) == (0, 3)
