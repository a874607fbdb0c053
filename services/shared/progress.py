"""The arithmetic of progress events (contracts/progress.py), shared by the trainer-proxy and the bench (pure).

Every figure comes from raw timestamps the caller reads from its own clock, so a test
scripts the clock and checks the estimates exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

# At most one progress event every this many seconds per step: a trainer printing a step every
# 10 ms must not put a hundred entries a second on the stream (its last reading is what counts).
EVERY_S = 2.0


def eta_s(elapsed_s: float, done: int, total: int | None) -> float | None:
    """Seconds left at the pace so far: elapsed / done * (total - done); 0 once done reaches the total;
    None without a total or before the first unit is done (no pace yet)."""
    if total is None:
        return None
    if done >= total:
        return 0.0
    if done <= 0 or elapsed_s < 0:
        return None
    return elapsed_s / done * (total - done)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def bench_eta_s(window_s: Sequence[float], launch_s: Sequence[float], windows_left: int,
                launches_left: int) -> float | None:
    """Seconds left of a bench: the mean measured window times the windows left, plus the mean launch
    (server start to ready) times the launches still to start. 0 when nothing is left; None while a
    part that is left has no measurement yet (before the first window, or the first launch)."""
    if windows_left <= 0 and launches_left <= 0:
        return 0.0
    if (windows_left > 0 and not window_s) or (launches_left > 0 and not launch_s):
        return None
    eta = _mean(window_s) * windows_left if windows_left > 0 else 0.0
    if launches_left > 0:
        eta += _mean(launch_s) * launches_left
    return eta


class RateLimit:
    """Lets one event through every `every_s` seconds; `force` lets the last one through whatever the time."""

    def __init__(self, every_s: float = EVERY_S) -> None:
        self.every_s = every_s
        self.last: float | None = None

    def allow(self, now: float, *, force: bool = False) -> bool:
        if force or self.last is None or now - self.last >= self.every_s:
            self.last = now
            return True
        return False
