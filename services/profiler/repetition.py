"""How much of an output reuses n-grams already in its context: prompt reuse, context reuse, reused span.

Counted over words (each CJK/kana/hangul character a word), a tokenizer-independent proxy for tokens
cheap enough for a sample of a million-line file. An output of fewer than NGRAM_N words has no n-gram and
is not measured (NaN); texts are capped at TEXT_CAP_CHARS (docs/profiler.md#repetition)."""

from __future__ import annotations

import math
import re
from typing import NamedTuple

import numpy as np

NGRAM_N = 3
TEXT_CAP_CHARS = 16000
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_WORD = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")


def words(text: str) -> list[str]:
    text = text[:TEXT_CAP_CHARS]
    return text.split() if text.isascii() else _WORD.findall(text)


class Reuse(NamedTuple):
    """One record's reuse measures; NaN where not measurable."""

    prompt: float  # share of output n-grams in the prompt
    context: float  # share in the prompt or earlier in the output
    span_words: float  # median run of copied output words; NaN when nothing is copied
    output_words: int  # output words measured (0 when not measured)


_UNMEASURED = Reuse(math.nan, math.nan, math.nan, 0)


def reuse(prompt: str, completion: str | None, n: int = NGRAM_N) -> tuple[float, float]:
    """(prompt_reuse, context_reuse) of one record; (nan, nan) when not measurable."""
    r = measure(prompt, completion, n)
    return r.prompt, r.context


def measure(prompt: str, completion: str | None, n: int = NGRAM_N) -> Reuse:
    """Every reuse measure of one record, from one split of its texts."""
    if not completion:
        return _UNMEASURED
    out = words(completion)
    if len(out) < n:
        return _UNMEASURED
    src = words(prompt)
    prompt_grams = set(zip(*(src[i:] for i in range(n)), strict=False))
    out_grams = list(zip(*(out[i:] for i in range(n)), strict=False))
    total = len(out_grams)
    # Set operations instead of a Python loop (this runs on every sampled record):
    # a gram found in the context is one in the prompt, or a repeat of an earlier
    # output gram, so the misses are exactly the first occurrences of the distinct
    # grams that are not in the prompt.
    hits = np.fromiter(map(prompt_grams.__contains__, out_grams), dtype=np.int8, count=total)
    in_prompt = int(hits.sum())
    in_context = total - len(set(out_grams).difference(prompt_grams))
    return Reuse(in_prompt / total, in_context / total, _median_span(hits, n) if in_prompt else math.nan, len(out))


def _median_span(hits: np.ndarray, n: int) -> float:
    """Median length in words of the runs of consecutive found n-grams (m grams cover m + n - 1 words)."""
    # Run edges from the differences of the 0/1 hits padded with a 0 on each side: +1 opens a run, -1 closes it.
    edges = np.diff(np.concatenate(([0], hits, [0])))
    lengths = np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
    return float(np.median(lengths)) + n - 1
