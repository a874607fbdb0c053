"""Every recommendation rule, at and around its threshold."""

from __future__ import annotations

import pytest

from services.profiler import recommend as r
from services.profiler.recommend import Evidence, recommend

CHAT = {"chat": 0.8, "code": 0.1, "structured": 0.1}
CODE = {"code": 0.7, "chat": 0.3}
TOOLS = {"agentic": 0.2, "structured": 0.1, "chat": 0.7}
MULTI = {"chat": 0.4, "multilingual": 0.4, "code": 0.2}


def ev(output_p50=200.0, concurrency=4.0, reuse=0.05, content=CHAT) -> Evidence:
    return Evidence(output_p50, concurrency, reuse, content)


def first_reason(rec) -> str:
    return rec.reasons[0]


def test_r1_no_output_lengths_means_none():
    rec = recommend(ev(output_p50=None))
    assert (rec.method, rec.num_speculative_tokens) == ("none", 0)
    assert first_reason(rec).startswith("R1")


def test_r2_very_short_outputs_mean_none():
    rec = recommend(ev(output_p50=r.SHORT_OUTPUT_TOKENS - 1, reuse=0.9))
    assert (rec.method, rec.num_speculative_tokens) == ("none", 0) and first_reason(rec).startswith("R2")
    assert recommend(ev(output_p50=r.SHORT_OUTPUT_TOKENS)).method != "none"


def test_r3_very_high_concurrency_means_none():
    rec = recommend(ev(concurrency=r.VERY_HIGH_CONCURRENCY, reuse=0.9))
    assert rec.method == "none" and first_reason(rec).startswith("R3")
    assert recommend(ev(concurrency=r.VERY_HIGH_CONCURRENCY - 1)).method != "none"


def test_r4_high_prompt_reuse_means_ngram_or_suffix():
    rec = recommend(ev(reuse=r.HIGH_REUSE, content=CHAT))
    assert (rec.method, rec.num_speculative_tokens) == ("ngram", 4) and first_reason(rec).startswith("R4")
    rec = recommend(ev(reuse=r.VERY_HIGH_REUSE, content=CHAT))
    assert (rec.method, rec.num_speculative_tokens) == ("ngram", 5)
    rec = recommend(ev(reuse=0.5, content=TOOLS))
    assert rec.method == "suffix" and "suffix" in first_reason(rec)
    assert recommend(ev(reuse=r.HIGH_REUSE - 0.01)).method == "eagle3"


def test_r5_no_content_evidence_means_ngram():
    rec = recommend(ev(concurrency=None, reuse=None, content=None))
    assert (rec.method, rec.num_speculative_tokens) == ("ngram", 3) and first_reason(rec).startswith("R5")


def test_r6_chat_like_means_eagle3_or_draft_model_when_multilingual():
    rec = recommend(ev(content=CHAT))
    assert (rec.method, rec.num_speculative_tokens) == ("eagle3", 3) and first_reason(rec).startswith("R6")
    rec = recommend(ev(content=MULTI))
    assert rec.method == "draft_model" and first_reason(rec).startswith("R6")


def test_r7_code_heavy_without_reuse_means_draft_model():
    rec = recommend(ev(content=CODE))
    assert (rec.method, rec.num_speculative_tokens) == ("draft_model", 3) and first_reason(rec).startswith("R7")


def test_unknown_reuse_is_said():
    rec = recommend(ev(reuse=None, content=CHAT))
    assert rec.method == "eagle3" and any("reuse unknown" in x for x in rec.reasons)


@pytest.mark.parametrize("reuse", [0.05, 0.7])
def test_k1_high_concurrency_caps_tokens(reuse):
    rec = recommend(ev(concurrency=r.HIGH_CONCURRENCY, reuse=reuse))
    assert rec.num_speculative_tokens == r.K_CAP_UNDER_LOAD
    assert any(x.startswith("K1") for x in rec.reasons)
    assert recommend(ev(concurrency=r.HIGH_CONCURRENCY - 1, reuse=reuse)).num_speculative_tokens > r.K_CAP_UNDER_LOAD


def test_k2_shortish_outputs_cap_tokens():
    rec = recommend(ev(output_p50=r.SHORTISH_OUTPUT_TOKENS - 1, reuse=0.7))
    assert rec.method == "ngram" and rec.num_speculative_tokens == r.K_CAP_UNDER_LOAD
    assert any(x.startswith("K2") for x in rec.reasons)
    assert recommend(ev(output_p50=r.SHORTISH_OUTPUT_TOKENS, reuse=0.7)).num_speculative_tokens == 5


def test_unknown_concurrency_is_said_and_not_used():
    rec = recommend(ev(concurrency=None))
    assert rec.method == "eagle3" and any("concurrency unknown" in x for x in rec.reasons)
