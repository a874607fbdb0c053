"""The expected trials per arm for the declared minimum effect, as status states it: from earlier runs
(the bench plan) before round 1, from round 1 (the pilot) after; the shared figure behind both."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.layout import BENCH_PLAN
from services.app.runs import rounds_status
from services.app.runs.progress import run_status
from services.bench.planning import rounds
from services.cli.main import render_status
from services.runtime.bundle.bundle import BundleStore
from services.shared import sequential

RUN = "toy-20261130-141414-abcdef"
ROUNDS = {"min_trials": 3, "max_trials": 15, "objective": "tpot", "guards": [], "min_effect_pct": 1.0,
          "server_bias_pct": 0.0, "alpha_per_side": 0.0125, "rule": "...",
          "noise": [{"concurrency": 1, "trials": 12, "runs": ["toy-20261129-010101-abcdef"], "cv_pct": 4.0,
                     "expected_trials_per_arm": 9},
                    {"concurrency": 4, "trials": 0, "runs": [], "cv_pct": None, "expected_trials_per_arm": None}]}


def look(n: int, *, stopped: str | None, verdict: str, expected: int | None) -> dict:
    return {"trials_per_arm": n, "max_trials": 15, "stopped": stopped, "levels": [
        {"candidate": "ngram-k3", "concurrency": 1, "trials": [n, n], "objective": "tpot", "verdict": verdict,
         "change_pct": -9.0, "interval_pct": [-14.0, -3.0], "worse_guards": [], "open": verdict == "undecided",
         "cv_pct": 6.5, "expected_trials_per_arm": expected}]}


@pytest.fixture
def bundle(tmp_path: Path) -> BundleStore:
    store = BundleStore(tmp_path / "bundles")
    store.write_json(RUN, BENCH_PLAN, {"run_id": RUN, "rounds": ROUNDS})
    return store


def test_before_round_1_the_plan_states_the_earlier_runs_figure(bundle: BundleStore) -> None:
    cost = rounds_status.rounds_cost(bundle, RUN)
    assert cost is not None and cost.trials_per_arm is None and cost.max_trials == 15
    c1, c4 = cost.levels
    assert (c1.source, c1.expected_trials_per_arm, c1.runs, c1.verdict) == (
        "earlier_runs", 9, ["toy-20261129-010101-abcdef"], None)
    assert (c4.source, c4.expected_trials_per_arm) == ("none", None)
    text = "\n".join(rounds_status.describe(cost))
    assert "3..15 trials per arm, minimum effect 1 %: round 1 (the pilot) not yet looked at" in text
    assert "c=1: about 9 trials per arm expected (per-trial spread 4 % from 1 earlier run(s))" in text
    assert "c=4: expected trials unknown (no earlier runs of this target and hardware; round 1 will tell)" in text


def test_from_round_1_the_pilot_states_it_and_the_latest_look_where_the_rounds_stand(bundle: BundleStore) -> None:
    bundle.write_json(RUN, rounds.look_path(3), look(3, stopped=None, verdict="undecided", expected=11))
    bundle.write_json(RUN, rounds.look_path(4), look(4, stopped="decided", verdict="better", expected=10))
    cost = rounds_status.rounds_cost(bundle, RUN)
    assert cost is not None and (cost.trials_per_arm, cost.stopped) == (4, "decided")
    [level] = cost.levels
    assert (level.source, level.candidate, level.expected_trials_per_arm, level.verdict, level.open) == (
        "pilot", "ngram-k3", 11, "better", False)  # the pilot's figure, the latest look's verdict
    status = run_status(RUN, [{"run_id": RUN, "schema": "bench.trial.completed", "produced_at": "2026-11-30T00:00:00"}])
    text = render_status(status.model_copy(update={"rounds": cost}))
    assert "4 trial(s) per arm so far, stopped (decided)" in text
    assert "ngram-k3 at c=1: about 11 trials per arm expected (per-trial spread 6.5 % from round 1); now better" in text


def test_no_rounds_no_figure(tmp_path: Path) -> None:
    store = BundleStore(tmp_path / "bundles")
    assert rounds_status.rounds_cost(store, RUN) is None  # no bundle
    store.write_json(RUN, BENCH_PLAN, {"run_id": RUN, "cells": []})
    assert rounds_status.rounds_cost(store, RUN) is None  # a fixed-trial plan


def test_the_looks_folder_is_the_bench_runners() -> None:
    assert rounds_status.LOOKS_DIR == rounds.LOOKS_DIR


def test_the_expected_trials_grow_with_the_noise_and_shrink_with_the_minimum_effect() -> None:
    def n(cv: float, effect: float = 0.01) -> int | None:
        return sequential.trials_for_min_effect(cv, alpha=0.025, min_effect=effect, first=3, cap=15)

    assert n(0.001) == 3  # quiet: round 1 settles it
    figures = [n(cv) for cv in (0.004, 0.006, 0.008)]
    settled = [f for f in figures if f is not None]
    assert settled == figures and settled == sorted(settled) and settled[0] < settled[-1]
    assert n(0.08) is None  # a 1 % effect at 8 % per-trial noise is not settled by 15 trials
    assert n(0.08, effect=0.10) is not None
    # The figure is where the interval at a zero change first fits within +-minimum effect.
    at = n(0.006)
    assert at is not None
    for m, fits in ((at, True), (at - 1, False)):
        lvl = sequential.nominal_level(m, alpha=0.025, first=3, cap=15)
        from scipy import stats as st

        half = st.t.isf(lvl, 2 * m - 2) * 0.006 * (2 / m) ** 0.5
        assert bool(half <= 0.00995) is fits


def test_an_unlimited_level_is_spelled_as_the_report_spells_it() -> None:
    # The campaign declares finite levels only; the spelling is the shared one should a level be unlimited.
    level = rounds_status.LevelCost.model_construct(
        concurrency=None,  # type: ignore[arg-type]  # unlimited: no campaign declares it, the spelling must hold
        candidate="ngram-k3", source="none", runs=[], cv_pct=None, expected_trials_per_arm=None,
        verdict=None, open=None)
    cost = rounds_status.RoundsCost(min_trials=3, max_trials=15, min_effect_pct=1.0, trials_per_arm=None,
                                    stopped=None, levels=[])
    text = "\n".join(rounds_status.describe(cost.model_copy(update={"levels": [level]})))
    assert "ngram-k3 at c=unlimited: expected trials unknown" in text
