"""Showing step.progress (contracts/progress.py) beside the event lines of `specdec watch` and `specdec demo`.

On a terminal: one rich progress bar per run and step (done/total, loss, time left), redrawn in
place under the event lines, which print above it. Elsewhere (a pipe, a log file, CI): plain lines,
at most one per run and step every PLAIN_EVERY_S, plus the first and the one that reaches the total,
so a log stays readable and still tells how far a long step is. rich is imported for bars only.

The use cases hand typed events (`StepProgress`); only their rendering lives here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO

# A plain line per run and step at most this often: a 5-minute training gives ~20 lines, not 150.
PLAIN_EVERY_S = 15.0


def duration(seconds: float | None) -> str:
    """45s, 4m05s, 1h02m; '?' when unknown."""
    if seconds is None:
        return "?"
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def counts(event: Any) -> str:
    """'30/100 steps (30%)', or '30 steps' without a total."""
    unit = f"{event.unit}s"
    if event.total is None:
        return f"{event.done} {unit}"
    return f"{event.done}/{event.total} {unit} ({100 * event.done // event.total}%)"


def detail(event: Any) -> str:
    """What follows the counts: the loss, the time left and the time spent."""
    parts = [] if event.loss is None else [f"loss {event.loss:.4g}"]
    parts += [f"ETA {duration(event.eta_s)}", f"elapsed {duration(event.elapsed_s)}"]
    return ", ".join(parts)


def plain(event: Any) -> str:
    return f"progress {event.run_id} {event.step}: {counts(event)}, {detail(event)}"


class ProgressView(Protocol):
    def line(self, text: str) -> None: ...

    def progress(self, event: Any) -> None: ...

    def close(self) -> None: ...


class Lines:
    """Event lines as they come; progress as a plain line, rate-limited per run and step."""

    def __init__(self, out: TextIO, *, clock: Callable[[], float] = time.monotonic,
                 every_s: float = PLAIN_EVERY_S) -> None:
        self.out = out
        self.clock = clock
        self.every_s = every_s
        self.last: dict[tuple[str, str], float] = {}
        self.finished: set[tuple[str, str]] = set()

    def line(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def progress(self, event: Any) -> None:
        key = (event.run_id, event.step)
        now = self.clock()
        reached = event.total is not None and event.done >= event.total
        if reached and key in self.finished:
            return
        if not reached and key in self.last and now - self.last[key] < self.every_s:
            return
        self.last[key] = now
        if reached:
            self.finished.add(key)
        self.line(plain(event))

    def close(self) -> None:
        return None


class Bars:
    """A rich progress bar per run and step, live on the terminal; event lines print above the bars."""

    def __init__(self, out: TextIO) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn

        self.console = Console(file=out)
        self.bars = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[counts]}"),
                             TextColumn("{task.fields[detail]}"), console=self.console, transient=False)
        self.tasks: dict[tuple[str, str], Any] = {}
        self.started = False

    def line(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def progress(self, event: Any) -> None:
        if not self.started:
            self.bars.start()
            self.started = True
        key = (event.run_id, event.step)
        if key not in self.tasks:
            self.tasks[key] = self.bars.add_task(f"{event.run_id} {event.step}", total=event.total,
                                                 completed=event.done, counts=counts(event), detail=detail(event))
        else:
            self.bars.update(self.tasks[key], total=event.total, completed=event.done, counts=counts(event),
                             detail=detail(event))

    def close(self) -> None:
        if self.started:
            self.bars.stop()
            self.started = False


def progress_view(out: TextIO) -> ProgressView:
    """Bars on a terminal, plain lines elsewhere."""
    isatty = getattr(out, "isatty", None)
    return Bars(out) if isatty is not None and isatty() else Lines(out)
