"""Stratified sampling helpers: raking, allocation, split, distances."""

from __future__ import annotations

import numpy as np
import pytest

from services.corpus.sample import (
    allocate,
    allocate_split,
    binned_ks,
    default_size,
    max_matched_size,
    priorities,
    rake,
    total_variation,
)


def test_rake_matches_both_marginals_and_keeps_zero_cells() -> None:
    joint = np.array([[30.0, 10.0, 0.0], [5.0, 5.0, 50.0]])
    rows, cols = np.array([0.5, 0.5]), np.array([0.3, 0.3, 0.4])
    table, unreachable = rake(joint, rows, cols)
    assert table.sum() == pytest.approx(1.0)
    assert table.sum(axis=1) == pytest.approx(rows, abs=1e-6)
    assert table.sum(axis=0) == pytest.approx(cols, abs=1e-6)
    assert table[0, 2] == 0.0
    assert unreachable == 0.0


def test_rake_is_identity_when_the_traffic_already_matches() -> None:
    joint = np.array([[3.0, 1.0], [2.0, 4.0]])
    table, _ = rake(joint, joint.sum(axis=1), joint.sum(axis=0))
    assert table == pytest.approx(joint / joint.sum())


def test_rake_reports_profile_mass_the_traffic_cannot_carry() -> None:
    joint = np.array([[4.0, 4.0], [0.0, 0.0]])
    table, unreachable = rake(joint, np.array([0.75, 0.25]), np.array([0.5, 0.5]))
    assert unreachable == pytest.approx(0.125)
    assert table[1].sum() == 0.0 and table.sum() == pytest.approx(1.0)


def test_allocate_is_proportional_and_redistributes_shortfalls() -> None:
    assert allocate(np.array([0.5, 0.3, 0.2]), 10, np.array([100, 100, 100])).tolist() == [5, 3, 2]
    # The middle stratum has one record: its shortfall goes to the others in proportion.
    assert allocate(np.array([0.5, 0.3, 0.2]), 10, np.array([100, 1, 100])).tolist() == [6, 1, 3]
    # Never more than is available in total.
    assert allocate(np.array([0.5, 0.5]), 10, np.array([2, 3])).tolist() == [2, 3]


def test_max_matched_size_is_the_tightest_stratum() -> None:
    assert max_matched_size(np.array([0.5, 0.25, 0.25]), np.array([100, 10, 80])) == 40


def test_default_size_grows_until_the_distance_reaches_the_tolerance() -> None:
    # Matched max is 20; past it the scarce stratum stays at 10: TV(N) = 0.5 - 10/N <= 0.05 up to N = 22.
    assert default_size(np.array([0.5, 0.5]), np.array([1000, 10])) == 22
    # A scarce stratum with a small target never moves the distance past 0.05: take everything.
    assert default_size(np.array([0.96, 0.04]), np.array([1000, 1])) == 1001
    assert default_size(np.array([0.5, 0.5]), np.array([1000, 10]), tolerance=0.0) == 20


def test_allocate_split_takes_the_share_in_proportion() -> None:
    held = allocate_split(np.array([50, 30, 20]), 0.1)
    assert held.tolist() == [5, 3, 2]
    assert allocate_split(np.array([7]), 0.0).tolist() == [0]


def test_priorities_are_deterministic_uniform_and_salted() -> None:
    keys = np.arange(20000, dtype=np.uint64)
    a, b = priorities(keys, 1), priorities(keys, 1)
    assert (a == b).all() and 0.0 <= a.min() and a.max() < 1.0
    assert abs(a.mean() - 0.5) < 0.01
    assert abs(np.corrcoef(a, priorities(keys, 2))[0, 1]) < 0.05
    assert abs(np.corrcoef(a, priorities(keys, 1, salt=1))[0, 1]) < 0.05


def test_binned_ks_and_total_variation() -> None:
    edges = np.array([0, 10, 20, np.inf])
    assert binned_ks(edges, [1, 1, 2], [1, 15, 25, 30]) == pytest.approx(0.0)
    assert binned_ks(edges, [1, 0, 0], [25, 25]) == pytest.approx(1.0)
    assert binned_ks(edges, [0, 0, 0], [1]) is None
    assert total_variation({"a": 0.5, "b": 0.5}, {"a": 1, "b": 1}) == pytest.approx(0.0)
    assert total_variation({"a": 1.0}, {"b": 3}) == pytest.approx(1.0)
