"""Fixtures of the shared text tests: the tiny tokenizer folders the corpus tests build."""

from __future__ import annotations

from tests.unit.corpus.conftest import make_tokenizer, tokenizer_json  # noqa: F401 - fixtures
