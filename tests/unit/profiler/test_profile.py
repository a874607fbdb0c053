"""profile_traffic end to end on small files: accounting, counting, times, mix, sampling."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from contracts.artifacts.profile import Profile
from services.profiler.errors import EmptyTraffic, ProfilerError, TooManyRejected, TrafficNotFound
from services.profiler.profile import MAX_REJECTED_EXAMPLES, profile_traffic
from services.shared.text.content import CONTENT_CLASSES
from services.shared.text.errors import TokenizerError
from services.shared.text.tokens import estimate_tokens


def write(path: Path, lines: list) -> Path:
    """Objects are dumped as JSON; strings are written as they are (bad lines, blanks)."""
    path.write_text("".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines), encoding="utf-8")
    return path


def flat(i: int, **over) -> dict:
    line = {"prompt": f"question number {i} about the weather", "completion": f"answer {i} is sunny today",
            "input_tokens": 10 + i, "output_tokens": 100 + 2 * i, "arrival_time": float(i), "latency_s": 1.5}
    line.update(over)
    return line


OPENAI = {
    "timestamp": 5.0, "latency_s": 2.0,
    "request": {"model": "m", "messages": [{"role": "user", "content": "Write code"}]},
    "response": {"choices": [{"message": {"content": "```python\nprint(1)\n```"}}],
                 "usage": {"prompt_tokens": 30, "completion_tokens": 40}},
}
SHAREGPT = {"conversations": [{"from": "human", "value": "Tell me a story about a cat"},
                              {"from": "gpt", "value": "Once upon a time a cat sat on a warm mat all day long."}]}


def test_mixed_forms_in_one_file(tmp_path):
    path = write(tmp_path / "t.jsonl", [flat(0), OPENAI, SHAREGPT, flat(1)])
    p = profile_traffic(path)
    assert p.records.accepted == 4 and p.records.rejected == 0
    assert p.records.forms == {"openai": 1, "sharegpt": 1, "flat": 2}
    assert p.input.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert p.input.size_bytes == path.stat().st_size
    # The ShareGPT line has no counts: both sides estimated, from the text.
    assert p.token_counting.estimated_records == 1
    assert p.token_counting.input.estimated == 1 and p.token_counting.input.from_fields == 3
    expected_in = [10, 30, estimate_tokens("Tell me a story about a cat"), 11]
    assert p.input_tokens.count == 4
    assert p.input_tokens.p50 == pytest.approx(float(np.percentile(expected_in, 50)))
    assert p.input_tokens.max == max(expected_in)
    Profile.model_validate_json(p.model_dump_json())  # PROFILE.json round-trips through the strict model


def test_blank_lines_are_skipped_and_not_counted(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("\n" + json.dumps(flat(0)) + "\n   \n\t\r\n" + json.dumps(flat(1)) + "\n\n", encoding="utf-8")
    p = profile_traffic(path)
    assert (p.records.accepted, p.records.rejected, p.records.blank_lines) == (2, 0, 4)
    assert p.records.rejected_share == 0.0


def test_utf8_bom_on_the_first_line_is_accepted_and_invalid_utf8_is_not_json(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(flat(0)).encode() + b"\n" + b'{"prompt": "\xff\xfe"}\n')
    p = profile_traffic(path, reject_threshold=1.0)
    assert p.records.accepted == 1 and p.records.rejected_by_kind == {"not_json": 1}


def test_bad_lines_are_counted_listed_and_redacted(tmp_path):
    good = [flat(i) for i in range(40)]
    bad = [
        "{not json at all",
        "[1, 2, 3]",
        json.dumps({"text": "contact alice@example.com"}),
        json.dumps({"prompt": "p", "input_tokens": -2}),
        json.dumps({"prompt": 42}),
        "\xff garbage",
    ]
    path = write(tmp_path / "t.jsonl", good[:10] + bad[:3] + good[10:] + bad[3:])
    p = profile_traffic(path, reject_threshold=0.2)
    assert p.records.accepted == 40 and p.records.rejected == 6
    assert p.records.rejected_by_kind == {"negative_count": 1, "not_json": 2, "not_object": 1,
                                         "unknown_form": 1, "wrong_type": 1}
    examples = p.records.rejected_examples
    assert [e.line for e in examples] == [11, 12, 13, 44, 45, 46]
    assert [e.kind for e in examples][:3] == ["not_json", "not_object", "unknown_form"]
    assert examples[0].excerpt == "{not json at all"
    assert "alice@example.com" not in examples[2].excerpt and "<PII:email>" in examples[2].excerpt
    assert p.records.rejected_share == pytest.approx(6 / 46)


def test_rejected_examples_are_capped_and_long_lines_cut(tmp_path):
    lines = [flat(0)] * 100 + ["x" * 5000] * (MAX_REJECTED_EXAMPLES + 5)
    p = profile_traffic(write(tmp_path / "t.jsonl", lines), reject_threshold=1.0)
    assert p.records.rejected == MAX_REJECTED_EXAMPLES + 5
    assert len(p.records.rejected_examples) == MAX_REJECTED_EXAMPLES
    assert all(len(e.excerpt) <= 160 for e in p.records.rejected_examples)


def test_secret_past_the_excerpt_cut_is_still_redacted(tmp_path):
    key = "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + "A" * 400 + "\\n-----END PRIVATE KEY-----"
    line = '{"oops": "' + "y" * 120 + key + '"'  # not JSON: unterminated object
    p = profile_traffic(write(tmp_path / "t.jsonl", [flat(0)] * 30 + [line]), reject_threshold=0.5)
    excerpt = p.records.rejected_examples[0].excerpt
    assert "MIIEvQ" not in excerpt and "BEGIN PRIVATE" not in excerpt


def test_threshold_failure_and_boundary(tmp_path):
    # 1 bad in 20 = 5 %: at the default threshold, accepted (fails only when the share passes it).
    path = write(tmp_path / "t.jsonl", [flat(i) for i in range(19)] + ["oops"])
    assert profile_traffic(path).records.rejected == 1
    with pytest.raises(TooManyRejected) as err:
        profile_traffic(path, reject_threshold=0.04)
    message = str(err.value)
    assert "1 of 20 lines" in message and "--reject-threshold" in message and "line 20" in message
    assert err.value.profile.records.rejected_share == pytest.approx(0.05)

    worse = write(tmp_path / "w.jsonl", [flat(i) for i in range(9)] + ["oops"])
    with pytest.raises(TooManyRejected):
        profile_traffic(worse)


@pytest.mark.parametrize("content", ["", "\n\n  \n", "nope\n"])
def test_no_usable_record_is_an_error(tmp_path, content):
    path = tmp_path / "t.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(EmptyTraffic):
        profile_traffic(path, reject_threshold=1.0)


def test_missing_file_and_bad_options(tmp_path):
    with pytest.raises(TrafficNotFound, match="check the path"):
        profile_traffic(tmp_path / "absent.jsonl")
    path = write(tmp_path / "t.jsonl", [flat(0)])
    with pytest.raises(ProfilerError, match="from 0 to 1"):
        profile_traffic(path, reject_threshold=5)
    with pytest.raises(ProfilerError, match="at least 2"):
        profile_traffic(path, sample_cap=1)
    with pytest.raises(TokenizerError, match="no tokenizer.json"):
        profile_traffic(path, tokenizer_dir=tmp_path)


def _word_tokenizer(directory: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "hello": 1, "world": 2, "again": 3}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    directory.mkdir()
    tok.save(str(directory / "tokenizer.json"))
    return directory


def test_tokenizer_folder_counts_lines_without_counts(tmp_path):
    tok_dir = _word_tokenizer(tmp_path / "tok")
    lines = [
        {"prompt": "hello world hello world hello", "completion": "again and again"},  # 5 in, 3 out
        {"prompt": "hello", "completion": "world", "input_tokens": 50},  # count field wins on input
    ]
    p = profile_traffic(write(tmp_path / "t.jsonl", lines), tokenizer_dir=tok_dir)
    assert p.token_counting.tokenizer_dir == str(tok_dir)
    assert p.token_counting.input.from_tokenizer == 1 and p.token_counting.input.from_fields == 1
    assert p.token_counting.output.from_tokenizer == 2 and p.token_counting.estimated_records == 0
    assert p.input_tokens.max == 50 and p.input_tokens.mean == pytest.approx((5 + 50) / 2)
    assert p.output_tokens.mean == pytest.approx((3 + 1) / 2)
    # Without the folder the same file is estimated, and says so.
    est = profile_traffic(tmp_path / "t.jsonl")
    assert est.token_counting.tokenizer_dir is None
    assert est.token_counting.input.estimated == 1 and est.token_counting.output.estimated == 2
    assert est.token_counting.estimated_records == 2
    assert "ascii_chars / 4" in est.token_counting.estimate_method


def test_missing_output_is_reported(tmp_path):
    lines = [{"request": {"prompt": "hi there"}, "response": None, "timestamp": 1.0}, flat(0)]
    p = profile_traffic(write(tmp_path / "t.jsonl", lines))
    assert p.token_counting.output.missing == 1
    assert p.output_tokens.count == 1 and p.input_tokens.count == 2


def test_concurrency_from_times(tmp_path):
    lines = [flat(0, arrival_time=0.0, latency_s=10.0), flat(1, arrival_time=2.0, latency_s=2.0),
             flat(2, arrival_time=3.0, latency_s=3.0), flat(3, arrival_time=10.0, latency_s=2.0)]
    c = profile_traffic(write(tmp_path / "t.jsonl", lines)).concurrency
    assert (c.records_with_times, c.max, c.reason) == (4, 3, None)
    assert c.mean == pytest.approx(17 / 12) and c.span_s == pytest.approx(12.0)
    assert c.arrival_rate_per_s == pytest.approx(3 / 10)


def test_no_times_gives_null_with_reasons(tmp_path):
    c = profile_traffic(write(tmp_path / "t.jsonl", [SHAREGPT, SHAREGPT])).concurrency
    assert c.mean is None and c.max is None and c.arrival_rate_per_s is None
    assert "no record carries a start time" in c.reason
    starts_only = [flat(i, latency_s=None) for i in range(3)]
    c = profile_traffic(write(tmp_path / "s.jsonl", starts_only)).concurrency
    assert c.arrival_rate_per_s == pytest.approx(1.0) and c.mean is None and "latency" in c.reason


def test_content_mix_sums_to_one_and_count_only_lines_are_not_classified(tmp_path):
    p = profile_traffic(write(tmp_path / "t.jsonl", [flat(0), OPENAI, SHAREGPT]))
    mix = p.content_mix
    assert sum(getattr(mix, c) for c in CONTENT_CLASSES) == pytest.approx(1.0)
    assert mix.code == pytest.approx(1 / 3) and mix.records_classified == 3
    counts = [{"prompt": "", "input_tokens": 5, "output_tokens": 50}] * 3
    p = profile_traffic(write(tmp_path / "c.jsonl", counts))
    assert p.content_mix.chat is None and "count-only" in p.content_mix.reason
    assert p.repetition.mean is None and p.repetition.reason
    assert p.recommended_method.method == "ngram"  # R5: no text evidence


def test_repetition_and_recommendation_on_copying_traffic(tmp_path):
    doc = "the invoice lists three items shipped to the warehouse on monday with tracking numbers attached"
    lines = [{"prompt": f"Quote the sentence: {doc}", "completion": doc, "input_tokens": 40, "output_tokens": 120,
              "arrival_time": float(i), "latency_s": 0.5} for i in range(10)]
    p = profile_traffic(write(tmp_path / "t.jsonl", lines))
    assert p.repetition.mean == pytest.approx(1.0) and p.repetition.share_above_half == 1.0
    assert p.recommended_method.method == "ngram" and p.recommended_method.num_speculative_tokens == 5


def test_large_files_are_sampled_and_say_so(tmp_path):
    lines = [flat(i) for i in range(3000)]
    p = profile_traffic(write(tmp_path / "t.jsonl", lines), sample_cap=100)
    s = p.sampling
    assert s.sampled and s.records_considered == 3000 and 50 <= s.records_sampled <= 100
    assert s.stride >= 30 and p.content_mix.records_classified == s.records_sampled
    full = profile_traffic(tmp_path / "t.jsonl")
    assert not full.sampling.sampled and full.sampling.records_sampled == 3000
    assert p.input_tokens == full.input_tokens  # counts are never sampled


def test_same_file_same_profile_bytes(tmp_path):
    # The bundle is write-once: a redelivered profile.requested must produce identical bytes.
    path = write(tmp_path / "t.jsonl", [flat(i) for i in range(50)] + [OPENAI, SHAREGPT, "bad"])
    first = profile_traffic(path, reject_threshold=0.5).model_dump_json(indent=2)
    assert profile_traffic(path, reject_threshold=0.5).model_dump_json(indent=2) == first


def test_memory_does_not_grow_with_file_bytes(tmp_path):
    import tracemalloc

    # 60 lines of ~100 KB each (6.5 MB): the peak stays at a few lines' worth, far below the file.
    body = "lorem ipsum dolor sit amet " * 4000
    lines = [{"prompt": body, "completion": body[:2000], "input_tokens": 30000, "output_tokens": 500}] * 60
    path = write(tmp_path / "big.jsonl", lines)
    assert path.stat().st_size > 6_000_000
    tracemalloc.start()
    try:
        profile_traffic(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_500_000, peak
