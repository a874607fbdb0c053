"""BenchRun's progress (services/bench/run.py, services/bench/progress.py) over the fake executor of
test_bench_run_interleaved: the total before the first server is up, the last report at the end, adopted
windows counted as done, and a failed cell's unmeasured windows leaving the total."""

from __future__ import annotations

import math

import pytest

from services.bench.progress import Snapshot
from services.shared.progress import RateLimit
from tests.unit.bench.test_run_interleaved import interleaved_plan, wired  # noqa: F401 (the fixture)


def reporting(run) -> list[Snapshot]:
    reports: list[Snapshot] = []

    async def report(snapshot: Snapshot) -> None:
        reports.append(snapshot)

    run.report = report
    # Every window in between held back, however long the fake run takes on a loaded machine: the first
    # report and the last (forced) always go out.
    run.progress.limit = RateLimit(every_s=math.inf)
    return reports


async def test_a_run_reports_its_total_first_and_everything_done_last(wired) -> None:  # noqa: F811
    make, executor, events, bundle = wired
    run = make(interleaved_plan())
    reports = reporting(run)
    await run.execute()
    assert [(r.done, r.total) for r in reports] == [(0, 18), (18, 18)]
    assert reports[0].eta_s is None and reports[-1].eta_s == 0.0


async def test_a_resumed_run_counts_what_an_earlier_attempt_recorded(wired) -> None:  # noqa: F811
    make, executor, events, bundle = wired
    make.interrupt.append(8)
    with pytest.raises(RuntimeError, match="killed"):
        await make(interleaved_plan()).execute()
    make.interrupt.clear()
    run = make(interleaved_plan())
    reports = reporting(run)
    await run.execute()
    assert [(r.done, r.total) for r in reports] == [(6, 18), (18, 18)]
