"""n-gram reuse of outputs."""

from __future__ import annotations

import math

import pytest

from services.profiler.repetition import reuse, words


def test_reuse_counts_output_ngrams_found_in_the_prompt():
    prompt = "the quick brown fox jumps over the lazy dog"
    # 4 output 3-grams: (the quick brown) (quick brown fox) in the prompt; (brown fox sleeps) (fox sleeps now) not.
    p, c = reuse(prompt, "the quick brown fox sleeps now")
    assert p == pytest.approx(2 / 4) and c == pytest.approx(2 / 4)
    assert reuse(prompt, prompt) == (1.0, 1.0)
    assert reuse(prompt, "completely different words entirely here") == (0.0, 0.0)


def test_context_reuse_counts_repeats_inside_the_output():
    p, c = reuse("unrelated prompt text", "a b c a b c")
    # 3-grams: abc bca cab abc -> the last repeats the first.
    assert p == 0.0 and c == pytest.approx(1 / 4)


def test_reuse_not_measurable_without_enough_output():
    assert all(math.isnan(v) for v in reuse("a b c", None))
    assert all(math.isnan(v) for v in reuse("a b c", "a b"))


def test_words_split_cjk_characters():
    assert words("今天 good day") == ["今", "天", "good", "day"]
    assert words("plain ascii  text") == ["plain", "ascii", "text"]
