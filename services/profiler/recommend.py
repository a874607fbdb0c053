"""Rules that turn a profile's numbers into a suggested speculative method.

The first rule that fires (R1..R7) picks the method, then the load rules (K1, K2) cap k; every rule that
decides or adjusts adds a reason in words. The thresholds are module constants so that the docs and the
tests name the same numbers (docs/profiler.md#recommended-method)."""

from __future__ import annotations

from dataclasses import dataclass

from contracts.artifacts.profile import Recommendation

SHORT_OUTPUT_TOKENS = 16
SHORTISH_OUTPUT_TOKENS = 64
VERY_HIGH_CONCURRENCY = 128.0
HIGH_CONCURRENCY = 32.0
HIGH_REUSE = 0.3
VERY_HIGH_REUSE = 0.6
TOOL_SHARE = 0.3
CHAT_SHARE = 0.5
MULTILINGUAL_SHARE = 0.3
K_CAP_UNDER_LOAD = 2


@dataclass(frozen=True)
class Evidence:
    """The numbers the rules read; None means unknown."""

    output_p50: float | None
    concurrency_mean: float | None
    prompt_reuse_mean: float | None
    content: dict[str, float] | None  # content class -> fraction


def recommend(ev: Evidence) -> Recommendation:
    reasons: list[str] = []
    if ev.output_p50 is None:
        return _none(
            "R1: no output lengths are known (no completions or output counts): nothing to judge speculation on"
        )
    if ev.output_p50 < SHORT_OUTPUT_TOKENS:
        return _none(
            f"R2: median output is {ev.output_p50:g} tokens (< {SHORT_OUTPUT_TOKENS}): drafting cannot pay on outputs "
            f"this short"
        )
    if ev.concurrency_mean is not None and ev.concurrency_mean >= VERY_HIGH_CONCURRENCY:
        return _none(
            f"R3: mean concurrency is {ev.concurrency_mean:.1f} (>= {VERY_HIGH_CONCURRENCY:g}): the batch is "
            "compute-bound, extra verification work would slow it down"
        )

    content = ev.content
    if ev.prompt_reuse_mean is not None and ev.prompt_reuse_mean >= HIGH_REUSE:
        tool_share = (content or {}).get("agentic", 0.0) + (content or {}).get("structured", 0.0)
        k = 5 if ev.prompt_reuse_mean >= VERY_HIGH_REUSE else 4
        if tool_share >= TOOL_SHARE:
            method = "suffix"
            why = (f"and agentic + structured requests are {tool_share:.0%} (>= {TOOL_SHARE:.0%}): suffix decoding "
                   "also reuses spans across requests")
        else:
            method = "ngram"
            why = "so prompt lookup finds what the output copies"
        reasons.append(
            f"R4: outputs reuse {ev.prompt_reuse_mean:.0%} of their word 3-grams from the prompt (>= "
            f"{HIGH_REUSE:.0%}), {why}"
        )
    elif content is None:
        method, k = "ngram", 3
        reasons.append(
            "R5: there is no text to measure content or reuse (named shapes or count-only traffic): ngram needs "
            "no training, and the bench measures whether it pays"
        )
    else:
        if ev.prompt_reuse_mean is None:
            reasons.append("reuse unknown: no sampled record had an output of 3 words or more")
        chat_like = content.get("chat", 0.0) + content.get("multilingual", 0.0) + content.get("math", 0.0)
        k = 3
        if chat_like >= CHAT_SHARE:
            if content.get("multilingual", 0.0) >= MULTILINGUAL_SHARE:
                method = "draft_model"
                reasons.append(
                    f"R6: chat-like traffic ({chat_like:.0%}) with {content['multilingual']:.0%} multilingual requests "
                    f"(>= {MULTILINGUAL_SHARE:.0%}): a small draft model of the target's family keeps its multilingual "
                    "vocabulary better than a head trained on the corpus"
                )
            else:
                method = "eagle3"
                reasons.append(
                    f"R6: chat-like traffic ({chat_like:.0%} >= {CHAT_SHARE:.0%}) with little prompt reuse: an EAGLE-3 "
                    "head trained on the matched corpus predicts it best at low overhead"
                )
        else:
            method = "draft_model"
            reasons.append(
                f"R7: code-heavy or mixed traffic (chat-like {chat_like:.0%} < {CHAT_SHARE:.0%}) with little prompt "
                "reuse: a small draft model of the target's family is the general-purpose choice"
            )

    if ev.concurrency_mean is None:
        reasons.append("concurrency unknown (no times in the traffic): not considered")
    elif ev.concurrency_mean >= HIGH_CONCURRENCY and k > K_CAP_UNDER_LOAD:
        k = K_CAP_UNDER_LOAD
        reasons.append(
            f"K1: mean concurrency {ev.concurrency_mean:.1f} (>= {HIGH_CONCURRENCY:g}): at most {K_CAP_UNDER_LOAD} "
            "speculative tokens, rejected drafts cost batch capacity"
        )
    if ev.output_p50 < SHORTISH_OUTPUT_TOKENS and k > K_CAP_UNDER_LOAD:
        k = K_CAP_UNDER_LOAD
        reasons.append(
            f"K2: median output {ev.output_p50:g} tokens (< {SHORTISH_OUTPUT_TOKENS}): at most {K_CAP_UNDER_LOAD} "
            "speculative tokens"
        )
    return Recommendation(method=method, num_speculative_tokens=k, reasons=reasons)


def _none(reason: str) -> Recommendation:
    return Recommendation(method="none", num_speculative_tokens=0, reasons=[reason])
