"""ngram_advice: the N-rules on both sides of their thresholds, reused spans, and the field in PROFILE.json."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from contracts.artifacts.profile import NgramAdvice, Profile
from services.profiler import ngram_advice as n
from services.profiler import recommend as r
from services.profiler import stats
from services.profiler.ngram_advice import AdviceEvidence, advise, span_evidence
from services.profiler.profile import profile_shapes, profile_traffic
from services.profiler.repetition import measure


def ev(reuse: float | None = 0.1, span: float | None = 8.0, ratio: float | None = 1.0, p50: float | None = 200.0,
       *, conc: float | None = 1.0) -> AdviceEvidence:
    return AdviceEvidence(reuse, None if reuse is not None else "no text", span, ratio, p50, conc)


def rule(advice: NgramAdvice, name: str) -> str:
    return next(x for x in advice.reasons if x.startswith(f"{name}:"))


@pytest.mark.parametrize(("reuse", "k"), [
    (r.HIGH_REUSE - 0.01, 3), (r.HIGH_REUSE, 4), (r.VERY_HIGH_REUSE - 0.01, 4), (r.VERY_HIGH_REUSE, 5),
])
def test_k_grows_with_reuse(reuse, k):
    advice = advise(ev(reuse=reuse))
    assert advice.num_speculative_tokens == k
    assert advice.estimated_acceptance == pytest.approx(reuse)
    assert f"k = {k}" in rule(advice, "NK")


def test_k_is_capped_by_load_and_short_outputs_like_the_recommendation():
    assert advise(ev(reuse=0.9, conc=r.HIGH_CONCURRENCY - 0.1)).num_speculative_tokens == 5
    loaded = advise(ev(reuse=0.9, conc=r.HIGH_CONCURRENCY))
    assert loaded.num_speculative_tokens == r.K_CAP_UNDER_LOAD and rule(loaded, "K1")
    assert advise(ev(reuse=0.9, p50=r.SHORTISH_OUTPUT_TOKENS)).num_speculative_tokens == 5
    short = advise(ev(reuse=0.9, p50=r.SHORTISH_OUTPUT_TOKENS - 1))
    assert short.num_speculative_tokens == r.K_CAP_UNDER_LOAD and rule(short, "K2")
    tiny = advise(ev(reuse=0.9, p50=r.SHORT_OUTPUT_TOKENS - 1))
    assert any("R2/R3" in x for x in tiny.reasons)  # advice still given, with the warning
    assert not any("R2/R3" in x for x in short.reasons)


@pytest.mark.parametrize(("span_tokens", "low", "high"), [
    (3.0, 2, 3),     # floor of min; max limited by the span but above min
    (8.0, 2, 4),     # 8 x 0.25 = 2, max = 2 x min
    (12.0, 3, 6),
    (15.9, 3, 6),
    (16.0, 4, 8),
    (100.0, 4, 8),   # both capped
])
def test_lookup_lengths_follow_the_reused_span(span_tokens, low, high):
    advice = advise(ev(span=span_tokens / 2, ratio=2.0))
    assert (advice.prompt_lookup_min, advice.prompt_lookup_max) == (low, high)
    assert advice.reused_span_tokens == pytest.approx(span_tokens)
    assert n.LOOKUP_MIN_FLOOR <= low <= n.LOOKUP_MIN_CAP and high <= n.LOOKUP_MAX_CAP and high > low


def test_span_falls_back_to_n_words_and_words_to_tokens():
    advice = advise(ev(reuse=0.0, span=None, ratio=None))
    assert advice.reused_span_words is None and advice.reused_span_tokens == 3.0
    assert "3 words" in rule(advice, "NS") and "one token" in rule(advice, "NS")
    assert (advice.prompt_lookup_min, advice.prompt_lookup_max) == (2, 3)


def test_no_reuse_evidence_gives_null_settings_with_the_reason():
    advice = advise(ev(reuse=None))
    assert (advice.num_speculative_tokens, advice.prompt_lookup_min, advice.prompt_lookup_max) == (None, None, None)
    assert advice.estimated_acceptance is None and "no text" in rule(advice, "NA")


def test_the_contract_refuses_half_set_or_inverted_settings():
    base = advise(ev()).model_dump()
    with pytest.raises(ValidationError, match="together"):
        NgramAdvice.model_validate({**base, "prompt_lookup_max": None})
    with pytest.raises(ValidationError, match="must not exceed"):
        NgramAdvice.model_validate({**base, "prompt_lookup_min": 4, "prompt_lookup_max": 3})


def test_measure_finds_the_runs_copied_from_the_prompt():
    # Output grams: abc (hit) bcx cxy xyz yzf zfg fgh (hit) ghq hqe qef efg (hit) fgh (hit):
    # runs of 1, 1 and 2 grams = 3, 3 and 4 words; median 3.
    m = measure("a b c d e f g h", "a b c x y z f g h q e f g h")
    assert m.span_words == 3.0 and m.output_words == 14 and m.prompt == pytest.approx(4 / 12)
    assert measure("the quick brown fox jumps", "the quick brown fox sleeps").span_words == 4.0
    assert math.isnan(measure("unrelated words only", "a b c d").span_words)
    assert math.isnan(measure("a b c", "a b").span_words) and measure("a b c", "a b").output_words == 0


def test_span_evidence_pools_tokens_per_word_and_takes_the_median_span():
    nan = math.nan
    span, ratio = span_evidence(np.array([3.0, nan, 5.0, 9.0]), np.array([10.0, 10.0, nan, 20.0]),
                                np.array([15.0, nan, 8.0, 30.0]))
    assert span == 5.0 and ratio == pytest.approx(45 / 30)
    assert span_evidence(np.array([nan]), np.array([nan]), np.array([nan])) == (None, None)


def test_sampler_thinning_keeps_the_span_columns_aligned():
    sampler = stats.StrideSampler(cap=50)
    for i in range(5000):
        if sampler.wants(i):
            sampler.add(i, 0, 0.0, 0.0, span_words=float(i), output_words=float(i), output_tokens=float(2 * i))
    index = np.frombuffer(sampler.index, dtype=np.int64).astype(float)
    assert list(np.frombuffer(sampler.span_words)) == list(index)
    assert list(np.frombuffer(sampler.output_tokens)) == list(2 * index)


def test_copying_traffic_gets_long_lookups_and_a_high_k(tmp_path: Path):
    doc = " ".join(f"word{i}" for i in range(40))
    lines = [{"prompt": f"Repeat this: {doc}", "completion": doc, "input_tokens": 60, "output_tokens": 80}] * 20
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    advice = profile_traffic(path).ngram_advice
    assert advice is not None and advice.num_speculative_tokens == 5
    assert advice.reused_span_words == 40.0 and advice.tokens_per_word == pytest.approx(2.0)
    assert (advice.prompt_lookup_min, advice.prompt_lookup_max) == (n.LOOKUP_MIN_CAP, n.LOOKUP_MAX_CAP)


def test_shapes_profile_has_null_advice_and_old_profiles_still_validate():
    p = profile_shapes(["short"])
    assert p.ngram_advice is not None and p.ngram_advice.num_speculative_tokens is None
    assert "shapes" in p.ngram_advice.reasons[0]
    old = json.loads(p.model_dump_json())
    del old["ngram_advice"]  # a PROFILE.json written before the field existed
    assert Profile.model_validate(old).ngram_advice is None
