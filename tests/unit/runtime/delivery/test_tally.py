"""A step's delivery log in its run's bundle (services/runtime/delivery/tally.py), on a real bundle folder."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.tally import record_attempt, record_dead, record_replay, run_paths, tally_of

RUN = "toy-20261203-000000-tally1"
STEP = {"service": "profiler", "schema": "profile.requested", "step_key": "step"}


def test_attempts_count_until_dead_and_a_replay_starts_afresh(tmp_path: Path) -> None:
    bundle = BundleStore(tmp_path, fsync=False)
    assert [record_attempt(bundle, RUN, **STEP, instance="a") for _ in range(2)] == [1, 2]
    record_dead(bundle, RUN, **STEP, dead_letter_id="letter1", kind="failed")
    assert tally_of(run_paths(bundle, RUN), **STEP).dead == "letter1"
    assert record_attempt(bundle, RUN, **STEP, instance="a") is None, "a dead step is not delivered"
    assert record_replay(bundle, RUN, "unknown", "op") is False
    assert record_replay(bundle, RUN, "letter1", "op") is True
    assert tally_of(run_paths(bundle, RUN), **STEP).dead is None
    assert record_attempt(bundle, RUN, **STEP, instance="a") == 1
    # Another step of the same run keeps its own count.
    other = {**STEP, "step_key": "other"}
    assert record_attempt(bundle, RUN, **other, instance="a") == 1


def test_writers_racing_for_a_number_each_get_their_own(tmp_path: Path) -> None:
    bundle = BundleStore(tmp_path, fsync=False)
    with ThreadPoolExecutor(8) as pool:
        counts = list(pool.map(lambda n: record_attempt(bundle, RUN, **STEP, instance=f"i{n}"), range(8)))
    assert sorted(count or 0 for count in counts) == list(range(1, 9))  # None (dead-lettered) fails as 0
    assert tally_of(run_paths(bundle, RUN), **STEP).attempts == 8
