"""Exact and near-duplicate detection."""

from __future__ import annotations

import random

from services.corpus.dedup import NearDuplicateIndex, dedup_texts, exact_key, jaccard_estimate, minhash, shingles
from tests.unit.corpus.conftest import random_words


def test_exact_key_ignores_case_and_whitespace_only() -> None:
    assert exact_key("Hello   World\n") == exact_key("hello world")
    assert exact_key("hello world") != exact_key("hello, world!")


def test_exact_and_near_duplicates_are_dropped_and_distinct_texts_kept() -> None:
    rng = random.Random(7)
    base = random_words(rng, 60)
    words = base.split()
    near = " ".join(words[:30] + ["changed"] + words[31:])  # one word of 60 differs
    other = random_words(rng, 60)
    keep, exact, near_n = dedup_texts([base, "  " + base.upper(), near, other])
    assert keep == [0, 3]
    assert (exact, near_n) == (1, 1)


def test_texts_below_the_threshold_are_kept() -> None:
    rng = random.Random(8)
    words = random_words(rng, 40).split()
    half = " ".join(words[:20] + random_words(rng, 20).split())  # Jaccard about 0.3
    a, b = " ".join(words), half
    true_j = len(shingles(a) & shingles(b)) / len(shingles(a) | shingles(b))
    assert true_j < 0.6
    index = NearDuplicateIndex()
    assert index.add_if_new(a) and index.add_if_new(b)
    assert len(index) == 2


def test_minhash_estimates_jaccard() -> None:
    rng = random.Random(9)
    words = random_words(rng, 200).split()
    b = " ".join(words[:180] + random_words(rng, 20).split())
    a = " ".join(words)
    true_j = len(shingles(a) & shingles(b)) / len(shingles(a) | shingles(b))
    assert abs(jaccard_estimate(minhash(a), minhash(b)) - true_j) < 0.12


def test_short_texts_are_one_shingle() -> None:
    assert shingles("Hi there") == {"hi there"}
    keep, exact, near = dedup_texts(["hi there", "hi where"])
    assert keep == [0, 1] and exact == near == 0
