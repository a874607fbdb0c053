"""Exact and near-duplicate detection on the prompt side of corpus records (already redacted).

Two requests that ask the same thing are duplicates for training even when the traffic logged different
completions. Exact: a 64-bit blake2b of the normalized text (8 bytes a record keep a pass over a large
file cheap); near: MinHash with banded LSH at Jaccard >= NEAR_DUP_THRESHOLD. Seeded by constants: the same
texts give the same decisions (docs/corpus.md#duplicates)."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable

import numpy as np

NEAR_DUP_THRESHOLD = 0.8
NUM_PERM = 128
BANDS = 32
ROWS = NUM_PERM // BANDS
SHINGLE_WORDS = 3

_WS = re.compile(r"\s+")
_WORD = re.compile(r"\w+")
# Fixed hash family: multiply-add modulo 2^64 with a random odd multiplier,
# keeping the high 32 bits (multiply-shift hashing). The modulus must mix:
# a small multiplier against 32-bit inputs leaves h(x) nearly linear in x, so
# every permutation picks the same minimum and the estimate collapses.
_rng = np.random.default_rng(0x5EED)
_A = _rng.integers(0, np.iinfo(np.uint64).max, size=NUM_PERM, dtype=np.uint64, endpoint=True) | np.uint64(1)
_B = _rng.integers(0, np.iinfo(np.uint64).max, size=NUM_PERM, dtype=np.uint64, endpoint=True)
_SHIFT = np.uint64(32)


def normalize(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed and stripped."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def exact_key(text: str) -> int:
    """64-bit digest of the normalized text (the exact-duplicate key)."""
    digest = hashlib.blake2b(normalize(text).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def shingles(text: str) -> set[str]:
    words = _WORD.findall(normalize(text))
    if len(words) < SHINGLE_WORDS:
        return {" ".join(words)}
    return {" ".join(words[i : i + SHINGLE_WORDS]) for i in range(len(words) - SHINGLE_WORDS + 1)}


def minhash(text: str) -> np.ndarray:
    """MinHash signature (NUM_PERM uint64 values) of the text's shingles."""
    hashes = np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(s.encode("utf-8"), digest_size=8).digest(), "little")
            for s in shingles(text)
        ),
        dtype=np.uint64,
    )
    # ((a*x + b) mod 2^64) >> 32 for every permutation x every shingle; min over shingles.
    with np.errstate(over="ignore"):
        values = (np.outer(_A, hashes) + _B[:, None]) >> _SHIFT
    return values.min(axis=1)


def jaccard_estimate(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    return float(np.count_nonzero(sig_a == sig_b)) / NUM_PERM


class NearDuplicateIndex:
    """Kept records' MinHash signatures with an LSH index over bands.

    `add_if_new(text)` keeps the text and returns True unless a kept text is a
    near duplicate (estimated Jaccard >= threshold), in which case it returns
    False and keeps nothing: first come, first kept, so the caller decides the
    priority by the order it offers texts in.
    """

    def __init__(self, threshold: float = NEAR_DUP_THRESHOLD) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"near-duplicate threshold must be in (0, 1], got {threshold}")
        self.threshold = threshold
        self._signatures: list[np.ndarray] = []
        self._buckets: list[dict[bytes, list[int]]] = [{} for _ in range(BANDS)]

    def __len__(self) -> int:
        return len(self._signatures)

    def add_if_new(self, text: str) -> bool:
        sig = minhash(text)
        keys = [sig[b * ROWS : (b + 1) * ROWS].tobytes() for b in range(BANDS)]
        seen: set[int] = set()
        for band, key in enumerate(keys):
            for idx in self._buckets[band].get(key, ()):
                if idx in seen:
                    continue
                seen.add(idx)
                if jaccard_estimate(sig, self._signatures[idx]) >= self.threshold:
                    return False
        idx = len(self._signatures)
        self._signatures.append(sig)
        for band, key in enumerate(keys):
            self._buckets[band].setdefault(key, []).append(idx)
        return True


def dedup_texts(texts: Iterable[str], threshold: float = NEAR_DUP_THRESHOLD) -> tuple[list[int], int, int]:
    """Indices of the texts to keep (first occurrence wins), and the numbers
    of exact and near duplicates dropped. A convenience over the two steps."""
    keep: list[int] = []
    exact_seen: set[int] = set()
    index = NearDuplicateIndex(threshold)
    exact = near = 0
    for i, text in enumerate(texts):
        key = exact_key(text)
        if key in exact_seen:
            exact += 1
            continue
        exact_seen.add(key)
        if not index.add_if_new(text):
            near += 1
            continue
        keep.append(i)
    return keep, exact, near
