"""Helpers for the corpus tests: traffic files, profiles, tiny tokenizers."""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from services.profiler.profile import profile_traffic

GOOD_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def random_words(rng: random.Random, n: int) -> str:
    """n random 6-letter words: texts from it are never near duplicates."""
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=6)) for _ in range(n))


def write_jsonl(path: Path, rows: Sequence[dict[str, Any] | str]) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def flat_rows(rng: random.Random, lengths: list[int], *, code_every: int = 0) -> list[dict]:
    """Flat-form rows with the given input lengths (as counts), distinct texts."""
    rows = []
    for i, n in enumerate(lengths):
        words = random_words(rng, max(1, min(n // 2, 40)))  # counts come from the field: keep texts short
        prompt = f"```python\nx = {i}\n```\n{words}" if code_every and i % code_every == 0 else words
        rows.append({
            "prompt": prompt,
            "completion": random_words(rng, 8),
            "input_tokens": n,
            "output_tokens": rng.randint(4, 300),
        })
    return rows


@pytest.fixture
def make_profile(tmp_path: Path) -> Callable[[Path], Path]:
    """Profile a traffic file with the real profiler; returns PROFILE.json's path."""

    def make(traffic: Path, name: str = "PROFILE.json") -> Path:
        out = tmp_path / name
        out.write_text(profile_traffic(traffic, reject_threshold=1.0).model_dump_json(indent=2), encoding="utf-8")
        return out

    return make


@pytest.fixture(scope="session")
def tokenizer_json(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny word-level tokenizer (one token per word or punctuation mark),
    built with the `tokenizers` library: counts are predictable."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path.read_text(encoding="utf-8")


@pytest.fixture
def make_tokenizer(tmp_path: Path, tokenizer_json: str) -> Callable[..., Path]:
    """A tokenizer folder with tokenizer.json and a tokenizer_config.json carrying `template`."""

    def make(template: str | None = GOOD_TEMPLATE, model_max_length: int = 100000, name: str = "tok") -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
        config: dict = {"bos_token": "<s>", "eos_token": "</s>", "model_max_length": model_max_length}
        if template is not None:
            config["chat_template"] = template
        (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
        return folder

    return make
