"""Streaming accumulators: memory grows with per-record numbers, never with file bytes.

Per record the profiler keeps four numbers (input and output counts, start and
latency) in typed arrays (8 bytes each), and a bounded systematic sample for the
text measures. Everything below is pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np

# Fixed token-length bin lower edges (the last bin is open-ended). Fixed edges keep
# histograms of different profiles comparable bin by bin and give the corpus step
# its input-length buckets. Lower edge inclusive, upper edge exclusive.
HIST_EDGES: tuple[int, ...] = (0, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
PERCENTILES = (50.0, 90.0, 99.0)


class Column:
    """An append-only column of numbers in a compact typed array."""

    __slots__ = ("values",)

    def __init__(self, typecode: str) -> None:
        self.values: array[Any] = array(typecode)  # int (q) or float (d) by typecode

    def __len__(self) -> int:
        return len(self.values)

    def as_numpy(self) -> np.ndarray:
        # frombuffer shares the array's memory: no copy at the end of a big file.
        return np.frombuffer(self.values, dtype=np.int64 if self.values.typecode == "q" else np.float64)


def summarize(values: np.ndarray) -> dict:
    """count, mean, p50/p90/p99 (numpy's default linear interpolation), max and the histogram."""
    count = int(values.size)
    counts = histogram(values)
    if count == 0:
        return {"count": 0, "mean": None, "p50": None, "p90": None, "p99": None, "max": None, "histogram": counts}
    p50, p90, p99 = (float(v) for v in np.percentile(values, PERCENTILES))
    return {
        "count": count,
        "mean": float(values.mean()),
        "p50": p50,
        "p90": p90,
        "p99": p99,
        "max": int(values.max()),
        "histogram": counts,
    }


def histogram(values: np.ndarray) -> list[dict]:
    """Counts per HIST_EDGES bin: [{lower, upper (None: unbounded), count}]."""
    # searchsorted(side="right") - 1 is the index of the last edge <= value.
    index = np.searchsorted(np.asarray(HIST_EDGES), values, side="right") - 1
    counts = np.bincount(index, minlength=len(HIST_EDGES)) if values.size else np.zeros(len(HIST_EDGES), np.int64)
    uppers = list(HIST_EDGES[1:]) + [None]
    return [
        {"lower": lower, "upper": upper, "count": int(n)}
        for lower, upper, n in zip(HIST_EDGES, uppers, counts, strict=True)
    ]


def concurrency(starts: np.ndarray, latencies: np.ndarray) -> tuple[float, int]:
    """Time-weighted mean and max of the number of requests in flight.

    Each request occupies the half-open interval [start, start + latency): one
    that ends exactly when another starts does not overlap it. The mean is the
    integral of the in-flight count over [first start, last end] divided by that
    span, which equals sum(latency) / span. The max is taken at request starts
    (the count only rises there); a request is always in flight at its own start,
    so the max is at least 1 even for zero-latency requests.
    Invariant: 0 <= mean <= max.
    """
    if starts.size == 0:
        raise ValueError("concurrency of no intervals")
    ends = starts + latencies
    span = float(ends.max() - starts.min())
    sorted_starts = np.sort(starts)
    sorted_ends = np.sort(ends)
    started = np.searchsorted(sorted_starts, sorted_starts, side="right")
    ended = np.searchsorted(sorted_ends, sorted_starts, side="right")
    peak = max(1, int((started - ended).max()))
    # span == 0 means every request is a zero-latency instant: nothing was in flight over time.
    mean = float(latencies.sum()) / span if span > 0 else 0.0
    return mean, peak


def arrival_rate(starts: np.ndarray) -> tuple[float | None, str | None]:
    """Requests per second between the first and the last arrival, or (None, reason)."""
    if starts.size < 2:
        return None, "fewer than two records carry a start time"
    span = float(starts.max() - starts.min())
    if span <= 0:
        return None, "every start time is the same instant"
    return (starts.size - 1) / span, None


# Weyl-sequence key: the high bits of i * 2^64/phi (mod 2^64) spread consecutive
# indices evenly over [0, 2^64) without any short period, so a key threshold picks
# records evenly through the file yet cannot lock onto a periodic pattern in the
# traffic (every 10th line from one client, say) the way "every k-th line" can.
_GOLDEN = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1


def sample_key(i: int) -> int:
    return (i * _GOLDEN) & _MASK64


class StrideSampler:
    """An even, bounded sample of a stream of unknown length (about 1 record in `stride`).

    Record i (0-based, in accepted order) is measured when sample_key(i) <
    2^64 / stride, stride a power of two. When the sample passes `cap`, the stride
    doubles and kept items whose key is no longer under the halved threshold are
    dropped: the result is exactly the sample the final stride would have taken
    from the start, spread over the whole stream (the head of a file is not
    over-weighted), and only numbers are kept, never text.
    `expect(total)` lets the caller skip strides it already knows are too small.
    Invariant: len(sample) <= cap, and about cap/2 or more once the stream is longer than cap.
    """

    _COLUMNS = ("index", "label", "reuse", "context_reuse", "span_words", "output_words", "output_tokens")

    def __init__(self, cap: int) -> None:
        if cap < 2:
            raise ValueError("sample cap must be at least 2")
        self.cap = cap
        self.stride = 1
        self.threshold = 1 << 64  # sample_key(i) < threshold  <=>  sampled
        self.index = array("q")
        self.label = array("b")  # content class code, see content.CONTENT_CLASSES
        self.reuse = array("d")  # prompt n-gram reuse, NaN when not measurable
        self.context_reuse = array("d")
        self.span_words = array("d")  # median run of output words copied from the prompt, NaN when none
        self.output_words = array("d")  # output words measured, NaN when not measured
        self.output_tokens = array("d")  # the output's token count when its words were all measured, else NaN

    def wants(self, i: int) -> bool:
        return (i * _GOLDEN) & _MASK64 < self.threshold

    def add(
        self, i: int, label: int, reuse: float, context_reuse: float,
        *, span_words: float = math.nan, output_words: float = math.nan, output_tokens: float = math.nan,
    ) -> None:
        self.index.append(i)
        self.label.append(label)
        self.reuse.append(reuse)
        self.context_reuse.append(context_reuse)
        self.span_words.append(span_words)
        self.output_words.append(output_words)
        self.output_tokens.append(output_tokens)
        while len(self.index) > self.cap:
            self._thin()

    def expect(self, total: int) -> None:
        """Raise the stride to what `total` records need (a hint; the cap holds regardless)."""
        while total / (self.stride * 2) > self.cap:
            self._thin()

    def _thin(self) -> None:
        self.stride *= 2
        self.threshold >>= 1
        keep = [k for k, i in enumerate(self.index) if sample_key(i) < self.threshold]
        for name in self._COLUMNS:
            column = getattr(self, name)
            setattr(self, name, array(column.typecode, (column[k] for k in keep)))

    def __len__(self) -> int:
        return len(self.index)
