"""How the report and the CLI spell a number: a missing value, a concurrency level, a percentage, milliseconds,
an interval. One place, so the publisher, `specdec next` and the demo's summary print the same thing the
same way (each caller passes the decimals its output has always had)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")

MISSING = "-"  # a value that was not measured, recorded or computed
UNLIMITED = "unlimited"  # a concurrency level without a cap (None)


def concurrency(c: int | None, *, prefix: str = "", unlimited: str = UNLIMITED) -> str:
    """A concurrency level: `prefix` then the number (e.g. "c=4"), or `unlimited` for None (no cap)."""
    return unlimited if c is None else f"{prefix}{c}"


def number(v: float | None, spec: str) -> str:
    """`v` in the format `spec` (e.g. ".2f", "+.1f", ".3g"); MISSING for None."""
    return MISSING if v is None else format(v, spec)


def percent(v: float | None, *, signed: bool = True, decimals: int = 1) -> str:
    """Percentage points: "+3.2 %" (signed) or "3.2 %"; MISSING for None."""
    return MISSING if v is None else f"{v:{'+' if signed else ''}.{decimals}f} %"


def share(v: float | None, *, decimals: int = 0) -> str:
    """A fraction as a percentage, Python's `%` format: 0.45 -> "45%"; MISSING for None."""
    return MISSING if v is None else f"{v:.{decimals}%}"


def ms(v: float | None, *, decimals: int = 2) -> str:
    """Milliseconds: "12.34 ms"; MISSING for None."""
    return MISSING if v is None else f"{v:.{decimals}f} ms"


def interval(low: float | None, high: float | None, *, decimals: int = 1) -> str:
    """A signed interval in percentage points, "[-3.1, +0.4]"; MISSING when either end is missing."""
    if low is None or high is None:
        return MISSING
    return f"[{low:+.{decimals}f}, {high:+.{decimals}f}]"


def joined(parts: Iterable[T], sep: str = ", ") -> tuple[T | str, ...]:
    """The parts with `sep` between them, kept as parts (a report's rich text: references stay references)."""
    out: list[T | str] = []
    for i, part in enumerate(parts):
        if i:
            out.append(sep)
        out.append(part)
    return tuple(out)
