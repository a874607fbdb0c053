"""How far a bench run is (services/bench/progress.py): windows done out of the plan's, and the time left from
the windows and launches measured so far, on a scripted clock."""

from __future__ import annotations

import pytest

from services.bench.progress import BenchProgress, Snapshot


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def plan() -> list:
    """Two warm launches: the standing cell and one candidate, 2 trials at concurrency 1 and 4 each."""
    return [(index, cell, [(cell, trial, c) for trial in (0, 1) for c in (1, 4)])
            for index, cell in enumerate(("standing", "ngram"))]


def test_done_total_and_eta_follow_the_measured_windows_and_launches():
    clock = Clock()
    progress = BenchProgress(plan(), clock=clock)
    assert progress.snapshot([]) == Snapshot(done=0, total=8, eta_s=None, elapsed_s=0.0)
    clock.now = 1.0
    progress.launch_started(0)
    clock.now = 31.0
    progress.launch_ready(0)  # a 30 s launch
    window = ("standing", 0, 1)
    progress.work_started(window)
    clock.now = 39.0
    progress.work_paused(window)  # measured in 8 s
    progress.work_started(window)
    clock.now = 41.0
    progress.recorded(window)  # recorded in 2 s: the window took 10 s
    # 7 windows at 10 s, and the candidate's launch at 30 s.
    assert progress.snapshot([]) == Snapshot(done=1, total=8, eta_s=pytest.approx(100.0), elapsed_s=41.0)


def test_a_failed_cell_leaves_the_total_with_what_it_measured_and_its_launch_leaves_the_estimate():
    clock = Clock()
    progress = BenchProgress(plan(), clock=clock)
    progress.launch_started(0)
    clock.now = 20.0
    progress.launch_ready(0)
    progress.adopted(("standing", 0, 1))  # an earlier attempt's: done, untimed
    for window in (("standing", 0, 4), ("ngram", 0, 1)):
        progress.work_started(window)
        clock.now += 5.0
        progress.recorded(window)
    snapshot = progress.snapshot(["ngram"])
    # The candidate failed after one window: it stays counted; its 3 others leave the total.
    assert (snapshot.done, snapshot.total) == (3, 5)
    assert snapshot.eta_s == pytest.approx(2 * 5.0)  # no launch left that will run


def test_an_estimate_needs_a_measured_launch_while_launches_are_left():
    clock = Clock()
    progress = BenchProgress(plan(), clock=clock)
    progress.adopted(("standing", 0, 1))
    assert progress.snapshot([]).eta_s is None
    for window in [("standing", t, c) for t in (0, 1) for c in (1, 4)] + [
        ("ngram", t, c) for t in (0, 1) for c in (1, 4)
    ]:
        progress.adopted(window)
    assert progress.snapshot([]) == Snapshot(done=8, total=8, eta_s=0.0, elapsed_s=0.0)


def test_publishing_is_rate_limited_but_the_first_and_the_last_always_go():
    clock = Clock()
    progress = BenchProgress(plan(), clock=clock, every_s=2.0)
    assert progress.due([]) is not None
    clock.now = 1.0
    assert progress.due([]) is None
    clock.now = 1.5
    assert progress.due([], final=True) is not None
    clock.now = 3.6
    assert progress.due([]) is not None
