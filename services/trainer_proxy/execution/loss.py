"""Non-finite loss detection in a trainer's output (pure, incremental).

The documented formats (docs/trainer-proxy.md#loss-formats) are scanned on stdout and stderr as the
trainer writes them, so a NaN is seen while it still runs; one non-finite value stops the campaign.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from pydantic import Field

from contracts.envelope import Strict

# Past this, an unterminated line is scanned as it stands and dropped: a
# trainer printing megabytes without a newline must not grow memory for ever.
MAX_LINE_BYTES = 1 << 20
_TEXT_RE = re.compile(r"""(?<![\w])"?((?:[A-Za-z0-9]+_)*loss)"?\s*[=:]\s*"?"""
                      r"""([^\s,;"'\]}]+(?:\([^)\s]*\))?)""", re.IGNORECASE)
_TENSOR_RE = re.compile(r"^tensor\(([^,)]+)", re.IGNORECASE)
_MSVC_RE = re.compile(r"^[-+]?1\.#(inf|qnan|snan|ind)", re.IGNORECASE)
_NAN_RE = re.compile(r"^[-+]?nan(\(.*)?$", re.IGNORECASE)


class LossFinding(Strict):
    """A non-finite loss value seen in the trainer's output."""

    stream: str = Field(description="stdout or stderr.")
    line_number: int = Field(ge=1, description="1-based line number in that stream.")
    key: str = Field(description="The field or text key that held the value (loss, train_loss, ...).")
    value: str = Field(description="The value as printed.")
    line: str = Field(description="The line, shortened to 300 characters.")


class LossSummary(Strict):
    """What the scanner saw in one stream."""

    stream: str = Field(description="stdout or stderr.")
    lines: int = Field(ge=0, description="Lines scanned.")
    loss_values: int = Field(ge=0, description="Loss values seen (finite or not).")
    last_finite_loss: float | None = Field(description="The last finite loss value seen; None when none.")
    non_finite: LossFinding | None = Field(description="The first non-finite loss; None when every loss was finite.")


def parse_number(text: str) -> float | None:
    """The float a printed value stands for; None when it is not a number."""
    token = text.strip().rstrip(".,;:)]}").strip()
    tensor = _TENSOR_RE.match(token)
    if tensor:
        token = tensor.group(1).strip()
    if _MSVC_RE.match(token):
        return math.nan
    if _NAN_RE.match(token):
        return math.nan
    try:
        return float(token)
    except ValueError:
        return None


def _is_loss_key(key: str) -> bool:
    lowered = key.lower()
    return lowered == "loss" or lowered.endswith("_loss")


def _json_losses(obj: Any) -> Iterator[tuple[str, str, float]]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            if isinstance(key, str) and _is_loss_key(key) and not isinstance(value, bool):
                if isinstance(value, (int, float)):
                    yield key, repr(value), float(value)
                elif isinstance(value, str) and (number := parse_number(value)) is not None:
                    yield key, value, number
            if isinstance(value, (dict, list)):
                yield from _json_losses(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from _json_losses(item)


def line_losses(line: str) -> list[tuple[str, str, float]]:
    """Every (key, printed value, number) loss in one line of output."""
    stripped = line.strip()
    if stripped.startswith(("{", "[")):
        try:
            # json accepts NaN, Infinity and -Infinity literals; a line that is
            # not valid JSON (e.g. a bare `nan`) falls through to the text rules.
            return list(_json_losses(json.loads(stripped)))
        except (ValueError, RecursionError):
            pass
    found = []
    for match in _TEXT_RE.finditer(line):
        number = parse_number(match.group(2))
        if number is not None:
            found.append((match.group(1), match.group(2), number))
    return found


class LineBuffer:
    """One stream's bytes, as they arrive, to its complete lines (shared by the loss and the progress scans)."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> list[bytes]:
        """The lines `data` completes (a line past MAX_LINE_BYTES is given as it stands, and dropped)."""
        *complete, self._pending = (self._pending + data).split(b"\n")
        if len(self._pending) > MAX_LINE_BYTES:
            complete.append(self._pending)
            self._pending = b""
        return complete

    def finish(self) -> list[bytes]:
        """The last, unterminated line, if any (the stream ended)."""
        last, self._pending = self._pending, b""
        return [last] if last else []


class LossScanner:
    """Feed it a stream's bytes as they arrive; it keeps the first non-finite loss."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self._buffer = LineBuffer()
        self.lines = 0
        self.loss_values = 0
        self.last_finite: float | None = None
        self.finding: LossFinding | None = None

    def feed(self, data: bytes) -> LossFinding | None:
        """Scan every complete line in `data` (plus what came before); the first finding, if any."""
        for raw in self._buffer.feed(data):
            self._scan(raw)
        return self.finding

    def finish(self) -> LossSummary:
        """Scan the last, unterminated line and summarise."""
        for raw in self._buffer.finish():
            self._scan(raw)
        return LossSummary(
            stream=self.stream,
            lines=self.lines,
            loss_values=self.loss_values,
            last_finite_loss=self.last_finite,
            non_finite=self.finding,
        )

    def _scan(self, raw: bytes) -> None:
        self.lines += 1
        line = raw.decode("utf-8", errors="replace").rstrip("\r")
        for key, printed, number in line_losses(line):
            self.loss_values += 1
            if math.isfinite(number):
                self.last_finite = number
            elif self.finding is None:
                self.finding = LossFinding(
                    stream=self.stream, line_number=self.lines, key=key, value=printed, line=line[:300]
                )


def scan_bytes(stream: str, data: bytes) -> LossSummary:
    """Scan a whole output at once."""
    scanner = LossScanner(stream)
    scanner.feed(data)
    return scanner.finish()
