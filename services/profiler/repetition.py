"""How much of an output reuses n-grams already in its context.

n-gram speculation (vLLM's `ngram` method) and suffix decoding propose the tokens
that followed an earlier occurrence of the last few tokens; they pay off when the
output copies spans of its context. For one record with prompt words P and
output words O (words: whitespace-separated runs, each CJK/kana/hangul character
a word of its own since those scripts do not separate words by spaces; a
tokenizer-independent proxy for tokens that is cheap enough to run on a sample
of a million-line file):

- prompt_reuse  = share of O's n-grams (every window of NGRAM_N words) that also occur in P;
- context_reuse = share of O's n-grams that occur in P or earlier in O (what a
                  lookup over the whole context, generated text included, can find).

A record whose output has fewer than NGRAM_N words has no n-gram and is not
measured (NaN). Texts are capped at TEXT_CAP_CHARS characters each.
"""

from __future__ import annotations

import math
import re

NGRAM_N = 3
TEXT_CAP_CHARS = 16000
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_WORD = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")


def words(text: str) -> list[str]:
    text = text[:TEXT_CAP_CHARS]
    return text.split() if text.isascii() else _WORD.findall(text)


def reuse(prompt: str, completion: str | None, n: int = NGRAM_N) -> tuple[float, float]:
    """(prompt_reuse, context_reuse) of one record; (nan, nan) when not measurable."""
    if not completion:
        return math.nan, math.nan
    out = words(completion)
    if len(out) < n:
        return math.nan, math.nan
    src = words(prompt)
    prompt_grams = set(zip(*(src[i:] for i in range(n)), strict=False))
    out_grams = list(zip(*(out[i:] for i in range(n)), strict=False))
    total = len(out_grams)
    # Set operations instead of a Python loop (this runs on every sampled record):
    # a gram found in the context is one in the prompt, or a repeat of an earlier
    # output gram, so the misses are exactly the first occurrences of the distinct
    # grams that are not in the prompt.
    in_prompt = sum(map(prompt_grams.__contains__, out_grams))
    in_context = total - len(set(out_grams).difference(prompt_grams))
    return in_prompt / total, in_context / total
