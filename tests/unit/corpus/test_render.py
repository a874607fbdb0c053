"""Render check through a real tokenizer folder: passes, and fails three ways."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from services.corpus.build import build_corpus
from services.corpus.render import render_check
from services.shared.text.chat_template import load_chat_template
from services.shared.text.errors import RenderCheckFailed
from tests.unit.corpus.conftest import random_words, write_jsonl

RAISING_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}{{ raise_exception('a system message must come first') }}{% endif %}"
    "{% for m in messages %}{{ m['content'] }}{% endfor %}"
)
# Renders only the last turn: every earlier one (the system prompt) is lost.
DROPPING_TEMPLATE = "{{ bos_token }}<|user|>\n{{ messages[-1]['content'] }}\n<|assistant|>\n"


def _openai_rows(n: int, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    return [
        {
            "request": {
                "model": "m",
                "messages": [
                    {"role": "system", "content": "You answer briefly " + random_words(rng, 3)},
                    {"role": "user", "content": random_words(rng, rng.randint(5, 40))},
                ],
            },
            "response": {
                "choices": [{"message": {"role": "assistant", "content": random_words(rng, 6)}}],
                "usage": {"prompt_tokens": rng.randint(20, 60), "completion_tokens": 6},
            },
        }
        for _ in range(n)
    ]


@pytest.fixture
def traffic(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "traffic.jsonl", _openai_rows(40))


def test_render_check_passes_with_a_good_template(traffic, make_profile, make_tokenizer, tmp_path) -> None:
    manifest = build_corpus(
        make_profile(traffic), traffic, tmp_path / "c.jsonl", tokenizer_dir=make_tokenizer(), max_model_len=512
    )
    rc = manifest.render_check
    assert rc.status == "passed"
    assert rc.records_rendered == manifest.records.total == 40
    assert rc.max_model_len == 512
    # Word-level tokenizer: the render holds at least every word of the longest prompt.
    assert rc.max_tokens_seen is not None and 6 < rc.max_tokens_seen <= 512


def test_a_template_that_raises_fails_the_step(traffic, make_profile, make_tokenizer, tmp_path) -> None:
    rows = _openai_rows(5, seed=2)
    rows[3]["request"]["messages"] = rows[3]["request"]["messages"][1:]  # no system turn
    write_jsonl(traffic, rows)
    out = tmp_path / "c.jsonl"
    with pytest.raises(RenderCheckFailed, match=r"raised on 1 record.*a system message must come first"):
        build_corpus(make_profile(traffic), traffic, out, tokenizer_dir=make_tokenizer(RAISING_TEMPLATE))
    assert not out.exists() and not Path(str(out) + ".manifest.json").exists()


def test_a_template_that_drops_content_fails_the_step(traffic, make_profile, make_tokenizer, tmp_path) -> None:
    with pytest.raises(RenderCheckFailed, match=r"dropped content of 40 record\(s\).*#0 \(system\)"):
        build_corpus(
            make_profile(traffic), traffic, tmp_path / "c.jsonl", tokenizer_dir=make_tokenizer(DROPPING_TEMPLATE)
        )


def test_a_record_longer_than_max_model_len_fails_the_step(traffic, make_profile, make_tokenizer, tmp_path) -> None:
    rows = _openai_rows(10, seed=3)
    # Its logged count says 30 tokens, but its text is 300 words: only the render sees it.
    rows[4]["request"]["messages"][1]["content"] = random_words(random.Random(5), 300)
    rows[4]["response"]["usage"]["prompt_tokens"] = 30
    write_jsonl(traffic, rows)
    with pytest.raises(
        RenderCheckFailed,
        match=r"1 record\(s\) exceed max_model_len: [0-9a-f]{16}: \d+ prompt \+ 6 output tokens > 128",
    ):
        build_corpus(
            make_profile(traffic), traffic, tmp_path / "c.jsonl", tokenizer_dir=make_tokenizer(), max_model_len=128
        )


def test_max_model_len_defaults_to_the_tokenizer_config(traffic, make_profile, make_tokenizer, tmp_path) -> None:
    rows = _openai_rows(10, seed=3)
    rows[4]["request"]["messages"][1]["content"] = random_words(random.Random(5), 300)
    rows[4]["response"]["usage"]["prompt_tokens"] = 30
    write_jsonl(traffic, rows)
    with pytest.raises(RenderCheckFailed, match="> 128"):
        build_corpus(
            make_profile(traffic), traffic, tmp_path / "c.jsonl", tokenizer_dir=make_tokenizer(model_max_length=128)
        )


def test_folder_without_template_is_reported_not_run(traffic, make_profile, make_tokenizer, tmp_path) -> None:
    folder = make_tokenizer(template=None)
    manifest = build_corpus(make_profile(traffic), traffic, tmp_path / "c.jsonl", tokenizer_dir=folder)
    assert manifest.render_check.status == "not_run"
    assert "has no chat template" in (manifest.render_check.reason or "")


def test_render_check_failure_messages_are_redacted(make_tokenizer) -> None:
    leaky = "{{ raise_exception('bad turn: ' + messages[0]['content']) }}"
    template = load_chat_template(make_tokenizer(leaky))
    assert template is not None
    record = {"id": "0" * 16, "messages": [{"role": "user", "content": "mail a@b.io"}], "output_tokens": 1}
    with pytest.raises(RenderCheckFailed) as info:
        render_check(template, [record], None)
    assert "a@b.io" not in str(info.value) and "<PII:email>" in str(info.value)
