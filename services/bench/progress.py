"""How far a bench run is: windows measured out of the plan's, and the time left (pure, clock injected).

A unit is one measured window (one `bench.trial.completed`); a window an earlier attempt recorded counts as
done, untimed. The total and the estimate: docs/bench-runner.md#progress."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from services.shared.progress import EVERY_S, RateLimit, bench_eta_s

Window = tuple[str, int, int]  # (cell ID, trial, concurrency)


@dataclass(frozen=True)
class Snapshot:
    """What one step.progress event of the bench carries."""

    done: int
    total: int
    eta_s: float | None
    elapsed_s: float


class BenchProgress:
    """Counts windows and times windows and launches against the plan's launches."""

    def __init__(self, launches: Iterable[tuple[int, str, Iterable[Window]]], *,
                 clock: Callable[[], float] = time.monotonic, every_s: float = EVERY_S) -> None:
        """`launches`: (launch index, its cell ID, the windows it measures) for every launch of the plan."""
        self.clock = clock
        self.started_at = clock()
        self.launches = {index: (cell_id, frozenset(windows)) for index, cell_id, windows in launches}
        self.planned = frozenset(w for _, windows in self.launches.values() for w in windows)
        self.done: set[Window] = set()
        self.window_s: list[float] = []
        self.launch_s: list[float] = []
        self.opened: set[int] = set()
        self._launch_at: dict[int, float] = {}
        self._running: dict[Window, float] = {}
        self._spent: dict[Window, float] = {}
        self.limit = RateLimit(every_s)

    # --- what the run tells it ---

    def launch_started(self, index: int) -> None:
        self.opened.add(index)
        self._launch_at[index] = self.clock()

    def launch_ready(self, index: int) -> None:
        started = self._launch_at.pop(index, None)
        if started is not None:
            self.launch_s.append(self.clock() - started)

    def work_started(self, window: Window) -> None:
        """The window's measurement, or its recording, begins (the two are timed together)."""
        self._running[window] = self.clock()

    def work_paused(self, window: Window) -> None:
        started = self._running.pop(window, None)
        if started is not None:
            self._spent[window] = self._spent.get(window, 0.0) + self.clock() - started

    def recorded(self, window: Window) -> None:
        """The window's result and event are written: done, its time one sample of the mean."""
        self.work_paused(window)
        spent = self._spent.pop(window, None)
        if spent is not None and window not in self.done:
            self.window_s.append(spent)
        self.done.add(window)

    def adopted(self, window: Window) -> None:
        """An earlier attempt recorded the window: done, untimed."""
        self.done.add(window)

    # --- what it says ---

    def snapshot(self, failed_cells: Iterable[str]) -> Snapshot:
        failed = set(failed_cells)
        live = {w for w in self.planned if w[0] not in failed}
        done = len(self.done & self.planned)
        total = len(live | (self.done & self.planned))
        launches_left = sum(1 for index, (cell_id, windows) in self.launches.items()
                            if index not in self.opened and cell_id not in failed and windows - self.done)
        return Snapshot(done=done, total=total,
                        eta_s=bench_eta_s(self.window_s, self.launch_s, total - done, launches_left),
                        elapsed_s=max(0.0, self.clock() - self.started_at))

    def due(self, failed_cells: Iterable[str], *, final: bool = False) -> Snapshot | None:
        """The snapshot to publish now: at most one every `every_s`, the first and the last always."""
        if not self.limit.allow(self.clock(), force=final):
            return None
        return self.snapshot(failed_cells)
