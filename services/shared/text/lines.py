"""Traffic lines in bounded memory: no line longer than `MAX_LINE_BYTES` is ever held.

A line is parsed whole, so an unbounded line is unbounded memory: a traffic file
exported as one JSON array is one line the size of the file (a 120 MB array
peaked at 1.0 GB in the profiler; a multi-GB one was OOM-killed on every
restart). Both readers of traffic (the profiler and the corpus step) take their
lines from `read_lines`, which reads at most the limit plus one byte of any line
and refuses the file at the first longer one, naming the limit and the fix.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from services.shared.text.errors import TrafficLineTooLong

# 16 MiB: a 1M-token prompt is about 4 MB of text, so a real request line is far
# below it; parsing a line costs several times its size, so this bounds a step's
# parsing memory to well under a few hundred MB.
MAX_LINE_BYTES = 16 * 1024 * 1024
_LIMIT_TEXT = "16 MiB"


def read_lines(handle: BinaryIO, path: object, limit: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """Each line of `handle` (newline included) in order; raises `TrafficLineTooLong` at a longer one."""
    readline = handle.readline
    number = 0
    while raw := readline(limit + 1):
        number += 1
        if len(raw) > limit:
            raise TrafficLineTooLong(too_long_message(path, number, limit))
        yield raw


def too_long_message(path: object, number: int, limit: int = MAX_LINE_BYTES) -> str:
    size = _LIMIT_TEXT if limit == MAX_LINE_BYTES else f"{limit} bytes"
    return (
        f"line {number} of {path} is longer than {size}, the most a traffic line may hold (a whole JSON array "
        "on one line?): write one request a line (JSONL), e.g. `jq -c '.[]' FILE > FILE.jsonl` for an array"
    )
