"""Rules that turn a profile's reuse into ngram (prompt-lookup) settings: `ngram_advice`.

k grows with how much the outputs copy, the lookup lengths with how long the copied spans are. Every rule
adds a reason in words; the thresholds are module constants, the k thresholds and caps recommend.py's, so
the two never disagree on the same numbers (the rules NA..NE: docs/profiler.md#ngram-advice)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from contracts.artifacts.profile import NgramAdvice
from services.profiler.recommend import (
    HIGH_CONCURRENCY,
    HIGH_REUSE,
    K_CAP_UNDER_LOAD,
    SHORT_OUTPUT_TOKENS,
    SHORTISH_OUTPUT_TOKENS,
    VERY_HIGH_CONCURRENCY,
    VERY_HIGH_REUSE,
)
from services.profiler.repetition import NGRAM_N

# The lookup spends its first prompt_lookup_min tokens of a copied span matching it: at a
# quarter of the median span, three quarters of a typical span are left to draft.
LOOKUP_MIN_SHARE = 0.25
# A 1-token match fires after any common token and drafts whatever followed it elsewhere:
# mostly rejected drafts. 2 is the smallest match worth acting on.
LOOKUP_MIN_FLOOR = 2
LOOKUP_MIN_CAP = 4
# Longer matches are more specific; past 8 tokens a match adds little and delays the first draft.
LOOKUP_MAX_CAP = 8


@dataclass(frozen=True)
class AdviceEvidence:
    """The numbers the N-rules read; None means unknown."""

    prompt_reuse_mean: float | None
    no_reuse_reason: str | None  # why reuse is unknown (repetition.reason)
    span_words: float | None  # median reused span, words; None when no output copies a run
    tokens_per_word: float | None
    output_p50: float | None
    concurrency_mean: float | None


def span_evidence(
    span_words: np.ndarray, output_words: np.ndarray, output_tokens: np.ndarray
) -> tuple[float | None, float | None]:
    """(median reused span in words, output tokens per word) over sampled records; None where no record says."""
    spans = span_words[~np.isnan(span_words)]
    both = ~np.isnan(output_words) & ~np.isnan(output_tokens) & (output_words > 0)
    words = float(output_words[both].sum())
    ratio = float(output_tokens[both].sum()) / words if words > 0 else None
    return (float(np.median(spans)) if spans.size else None), (ratio if ratio else None)


def advise(ev: AdviceEvidence) -> NgramAdvice:
    if ev.prompt_reuse_mean is None:
        why = ev.no_reuse_reason or "reuse was not measured"
        return NgramAdvice(
            num_speculative_tokens=None, prompt_lookup_min=None, prompt_lookup_max=None, reused_span_words=None,
            tokens_per_word=ev.tokens_per_word, reused_span_tokens=None, estimated_acceptance=None,
            reasons=[f"NA: no ngram settings: {why}; the bench measures ngram with the campaign's own settings"],
        )
    reuse = ev.prompt_reuse_mean
    reasons: list[str] = []
    k = 5 if reuse >= VERY_HIGH_REUSE else 4 if reuse >= HIGH_REUSE else 3
    level = f">= {VERY_HIGH_REUSE:.0%}" if k == 5 else f">= {HIGH_REUSE:.0%}" if k == 4 else f"< {HIGH_REUSE:.0%}"
    reasons.append(f"NK: outputs reuse {reuse:.0%} of their word {NGRAM_N}-grams from the prompt ({level}): k = {k}, "
                   "longer drafts pay when more of the output is copied")
    k = _caps(k, ev, reasons)
    span_tokens = _span_tokens(ev, reasons)
    low = min(max(math.floor(span_tokens * LOOKUP_MIN_SHARE), LOOKUP_MIN_FLOOR), LOOKUP_MIN_CAP)
    high = max(low + 1, min(2 * low, math.floor(span_tokens), LOOKUP_MAX_CAP))
    reasons.append(
        f"NL: prompt_lookup_min = {low} (a {LOOKUP_MIN_SHARE:.0%} share of the {span_tokens:.1f}-token span, within "
        f"[{LOOKUP_MIN_FLOOR}, {LOOKUP_MIN_CAP}]: the match spends those tokens, the rest of the span is drafted); "
        f"prompt_lookup_max = {high} (up to twice the minimum and the span, at most {LOOKUP_MAX_CAP}): longer "
        "matches are tried first and are more specific"
    )
    reasons.append(f"NE: an estimated {reuse:.0%} of output positions can be drafted from the prompt (the share of "
                   "output n-grams found in it); an estimate from words, not a promise: the bench measures it")
    return NgramAdvice(
        num_speculative_tokens=k,
        prompt_lookup_min=low,
        prompt_lookup_max=high,
        reused_span_words=ev.span_words,
        tokens_per_word=ev.tokens_per_word,
        reused_span_tokens=span_tokens,
        estimated_acceptance=min(max(reuse, 0.0), 1.0),
        reasons=reasons,
    )


def _caps(k: int, ev: AdviceEvidence, reasons: list[str]) -> int:
    """recommend.py's K1 and K2 caps, and a note where its R2/R3 advise against speculation at all."""
    if ev.concurrency_mean is not None and ev.concurrency_mean >= HIGH_CONCURRENCY and k > K_CAP_UNDER_LOAD:
        k = K_CAP_UNDER_LOAD
        reasons.append(f"K1: mean concurrency {ev.concurrency_mean:.1f} (>= {HIGH_CONCURRENCY:g}): at most "
                       f"{K_CAP_UNDER_LOAD} speculative tokens, rejected drafts cost batch capacity")
    if ev.output_p50 is not None and ev.output_p50 < SHORTISH_OUTPUT_TOKENS and k > K_CAP_UNDER_LOAD:
        k = K_CAP_UNDER_LOAD
        reasons.append(f"K2: median output {ev.output_p50:g} tokens (< {SHORTISH_OUTPUT_TOKENS}): at most "
                       f"{K_CAP_UNDER_LOAD} speculative tokens")
    short = ev.output_p50 is not None and ev.output_p50 < SHORT_OUTPUT_TOKENS
    loaded = ev.concurrency_mean is not None and ev.concurrency_mean >= VERY_HIGH_CONCURRENCY
    if short or loaded:
        reasons.append("the recommended method is none (R2/R3): these settings serve only a campaign that "
                       "measures ngram anyway")
    return k


def _span_tokens(ev: AdviceEvidence, reasons: list[str]) -> float:
    if ev.span_words is None:
        words = float(NGRAM_N)
        source = f"no output copies a run of words from its prompt: the shortest span the measure sees, {NGRAM_N} words"
    else:
        words = ev.span_words
        source = f"copied runs of output words are {words:g} words long (median)"
    if ev.tokens_per_word is None:
        reasons.append(f"NS: {source}; no sampled record has both an output count and its words: a word is taken "
                       "as one token")
        return words
    tokens = words * ev.tokens_per_word
    reasons.append(
        f"NS: {source}, {tokens:.1f} tokens at the traffic's {ev.tokens_per_word:.2f} output tokens per word"
    )
    return tokens
