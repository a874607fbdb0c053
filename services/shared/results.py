"""Which files of a run's bundle are its trial results: the gate and the publisher find them alike.

`contracts.layout.RESULTS_GLOB` matches the accepted trials only; a rejected trial is listed with its
reasons (`rejected_files`) and counted by nobody (docs/gate.md#rejected-trials). Parsing and what an
unreadable file means stay with each reader.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from contracts import layout
from contracts.artifacts.speculation import speculation_problems
from contracts.artifacts.trials import Trial
from services.runtime.bundle.bundle import BundleStore


def result_files(bundle: BundleStore, run_id: str) -> list[Path]:
    """Every trial result in the run's bundle, in path order (missing run: none)."""
    return sorted(bundle.run_dir(run_id).glob(layout.RESULTS_GLOB))


def rejected_files(bundle: BundleStore, run_id: str) -> list[Path]:
    """Every trial the bench rejected in the run's bundle, in path order (never a result)."""
    return sorted(bundle.run_dir(run_id).glob(layout.REJECTED_GLOB))


def recheck(trial: Trial, max_model_len: int | None) -> list[str]:
    """Why a trial read from a file breaks the spec-decode rule (contracts/artifacts/speculation.py), [] when it holds.

    The gate and the publisher both re-check every result they read, with the
    rule the bench applied, so a hand-edited or older file is never counted. A
    file without specdec's identity declares nothing to check against."""
    if trial.identity is None:
        return []
    window = replace(trial.window, max_model_len=max_model_len)
    return speculation_problems(trial.identity.serving_config.speculative, trial.spec_decode, window)
