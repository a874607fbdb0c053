"""Which files of a run's bundle are its trial results: the gate and the publisher find them alike.

The bench-runner writes one result JSON per cell, trial and concurrency level
(`contracts.layout.trial_result`); `contracts.layout.RESULTS_GLOB` matches those
and nothing else. Reading stays with each reader (parsing is
`contracts.results.parse_trial`): the gate refuses the whole set when a file is
unreadable, naming each one; the publisher lists unreadable ones as problems of
the report.
"""

from __future__ import annotations

from pathlib import Path

from contracts import layout
from services.runtime.bundle import BundleStore


def result_files(bundle: BundleStore, run_id: str) -> list[Path]:
    """Every trial result in the run's bundle, in path order (missing run: none)."""
    return sorted(bundle.run_dir(run_id).glob(layout.RESULTS_GLOB))
