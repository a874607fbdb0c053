"""The trainer's progress, read from its output in the form the campaign declares (commands.train.progress; pure).

`ProgressScanner` keeps the last reading a line gave; `ProgressRelay` turns readings into `step.progress`
events, at most one every EVERY_S, with elapsed time and an ETA, and says once when the declared form
never matches (docs/trainer-proxy.md#progress).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from contracts.campaign.commands import TrainProgress
from services.shared.progress import EVERY_S, RateLimit, eta_s
from services.trainer_proxy.execution.loss import LineBuffer, parse_number

WARN_AFTER_S = 60.0


@dataclass(frozen=True)
class Reading:
    """One line's progress."""

    step: int
    total: int | None
    loss: float | None


def _whole(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    number = float(value) if isinstance(value, (int, float)) else parse_number(str(value))
    return number if number is not None and math.isfinite(number) else None


def _reading(step: object, total: object, loss: object) -> Reading | None:
    done = _whole(step)
    if done is None:
        return None
    whole = _whole(total)
    return Reading(step=done, total=whole if whole else None, loss=_finite(loss))


def read_line(form: TrainProgress, pattern: re.Pattern[str] | None, line: str) -> Reading | None:
    """The reading one line gives in the declared form; None when it gives none."""
    if form.format == "json":
        stripped = line.strip()
        if not stripped.startswith("{"):
            return None
        try:
            data = json.loads(stripped)
        except (ValueError, RecursionError):
            return None
        if not isinstance(data, dict) or "step" not in data:
            return None
        return _reading(data["step"], data.get("total"), data.get("loss"))
    assert pattern is not None, "a regex form has its pattern (contracts/campaign/commands.py)"
    match = pattern.search(line)
    if match is None:
        return None
    groups = match.groupdict()
    return _reading(groups.get("step"), groups.get("total"), groups.get("loss"))


class ProgressScanner:
    """Feed it each stream's bytes as they arrive; it keeps the last reading of any stream."""

    def __init__(self, form: TrainProgress) -> None:
        self.form = form
        self.pattern = re.compile(form.pattern) if form.pattern is not None else None
        self._buffers: dict[str, LineBuffer] = {}
        self.lines = 0
        # Readings so far: a relay compares it with what it sent to know whether anything new came.
        self.matches = 0
        self.latest: Reading | None = None

    def feed(self, stream: str, data: bytes) -> None:
        for raw in self._buffers.setdefault(stream, LineBuffer()).feed(data):
            self._scan(raw)

    def finish(self) -> None:
        """Read the streams' last, unterminated lines (the trainer ended)."""
        for buffer in self._buffers.values():
            for raw in buffer.finish():
                self._scan(raw)

    def _scan(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace").rstrip("\r")
        if not line.strip():
            return
        self.lines += 1
        reading = read_line(self.form, self.pattern, line)
        if reading is not None:
            self.matches += 1
            self.latest = reading


@dataclass(frozen=True)
class Update:
    """What one step.progress event of the training carries."""

    done: int
    total: int | None
    loss: float | None
    eta_s: float | None
    elapsed_s: float


class ProgressRelay:
    """Readings to updates, rate-limited, with the trainer's start time; the unmatched-form warning, once."""

    def __init__(self, form: TrainProgress, *, clock: Callable[[], float] = time.time, every_s: float = EVERY_S,
                 warn_after_s: float = WARN_AFTER_S) -> None:
        self.scanner = ProgressScanner(form)
        self.clock = clock
        self.limit = RateLimit(every_s)
        self.warn_after_s = warn_after_s
        self.started_at: float | None = None
        self._sent = 0
        self._warned = False
        # (when, step) of the first reading sent: the pace is measured from it, not from the trainer's start,
        # so the minutes a trainer spends before its first step (loading, labelling) do not inflate the ETA.
        self._anchor: tuple[float, int] | None = None

    def start(self, started_at: float) -> None:
        """The trainer's recorded start (wall clock, as the keeper or sbatch's caller recorded it)."""
        self.started_at = started_at

    def due(self, *, final: bool = False) -> Update | None:
        """The update to publish now: a reading newer than the last one sent, when the rate allows (always at
        the end)."""
        latest = self.scanner.latest
        if latest is None or self.scanner.matches == self._sent:
            return None
        now = self.clock()
        if not self.limit.allow(now, force=final):
            return None
        self._sent = self.scanner.matches
        elapsed = max(0.0, now - (self.started_at if self.started_at is not None else now))
        return Update(done=latest.step, total=latest.total, loss=latest.loss,
                      eta_s=self._eta(now, elapsed, latest.step, latest.total), elapsed_s=elapsed)

    def _eta(self, now: float, elapsed: float, step: int, total: int | None) -> float | None:
        """The pace since the first reading sent once a later step is seen; until then, since the trainer's start."""
        if self._anchor is None:
            self._anchor = (now, step)
        at, first = self._anchor
        if step > first and total is not None:
            return eta_s(now - at, step - first, total - first)
        return eta_s(elapsed, step, total)

    def warning(self, *, final: bool = False) -> str | None:
        """Once: the trainer printed lines (for WARN_AFTER_S, or to its end) and none matched the declared form."""
        if self._warned or self.scanner.matches or not self.scanner.lines:
            return None
        waited = self.clock() - self.started_at if self.started_at is not None else 0.0
        if not final and waited < self.warn_after_s:
            return None
        self._warned = True
        form = self.scanner.form
        declared = (f"format regex, pattern {form.pattern!r}" if form.format == "regex"
                    else "format json (objects with a top-level integer 'step')")
        return (f"commands.train.progress declares {declared}, but none of the trainer's {self.scanner.lines} "
                "output line(s) so far matches it: no progress is relayed; fix the declared form or the trainer's "
                "output")


class Reporter:
    """A relay wired to where its updates and its warning go; the executors' watch loops call `tick`."""

    def __init__(self, relay: ProgressRelay, publish: Callable[[Update], Awaitable[None]],
                 warn: Callable[[str], None]) -> None:
        self.relay = relay
        self.publish = publish
        self.warn = warn

    @property
    def scanner(self) -> ProgressScanner:
        return self.relay.scanner

    def start(self, started_at: float) -> None:
        self.relay.start(started_at)

    async def tick(self, *, final: bool = False) -> None:
        if final:
            self.relay.scanner.finish()
        update = self.relay.due(final=final)
        if update is not None:
            await self.publish(update)
        warning = self.relay.warning(final=final)
        if warning is not None:
            self.warn(warning)
