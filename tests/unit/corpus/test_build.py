"""build_corpus end to end on small files: records, manifest, matching, split, redaction."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from contracts.artifacts.corpus import ContentClass, CorpusManifest, CorpusRecord
from services.corpus.build import build_corpus
from services.corpus.errors import CorpusSkipped, InvalidCorpusOptions, ProfileUnusable, TrafficUnusable
from services.profiler.profile import profile_shapes
from services.shared.text.content import CONTENT_CLASSES
from services.shared.text.redact import KINDS, PLACEHOLDERS, ruleset
from tests.unit.corpus.conftest import flat_rows, random_words, write_jsonl


def _records(path: Path) -> list[CorpusRecord]:
    return [CorpusRecord.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_content_classes_match_the_profiler() -> None:
    assert ContentClass.__args__ == CONTENT_CLASSES  # type: ignore[attr-defined]  # a Literal's members


def test_manifest_hashes_counts_and_records(tmp_path, make_profile) -> None:
    rng = random.Random(1)
    rows: list = flat_rows(rng, [rng.randint(5, 400) for _ in range(120)], code_every=4)
    rows[7] = {"prompt": "only counts", "input_tokens": 3}  # no completion, no output count
    rows += ["{not json", "", "[1, 2]"]
    traffic = write_jsonl(tmp_path / "t.jsonl", rows)
    profile = make_profile(traffic)
    out = tmp_path / "out" / "CORPUS.jsonl"
    manifest = build_corpus(profile, traffic, out, size=60, seed=5)

    on_disk = CorpusManifest.model_validate_json((tmp_path / "out" / "CORPUS.jsonl.manifest.json").read_text())
    assert on_disk == manifest
    assert manifest.corpus_sha256 == _sha(out) and manifest.corpus_size_bytes == out.stat().st_size
    assert manifest.profile_sha256 == _sha(profile)
    assert manifest.traffic_sha256 == _sha(traffic) and manifest.traffic_is_profiled_file
    records = _records(out)
    assert len(records) == manifest.records.total == 60
    assert manifest.records.heldout == sum(r.split == "heldout" for r in records) == 6
    assert manifest.records.train == 54
    assert len({r.id for r in records}) == 60
    assert manifest.content_classes == {c: sum(r.content_class == c for r in records) for c in CONTENT_CLASSES}
    assert manifest.content_classes["code"] > 0
    acc = manifest.input
    assert (acc.lines, acc.blank_lines, acc.accepted, acc.rejected) == (123, 1, 120, 2)
    assert acc.rejected_by_kind == {"not_json": 1, "not_object": 1}
    assert [e.line for e in acc.rejected_examples] == [121, 123]
    assert acc.skipped["no_output_tokens"] == 1 and acc.unique == 119
    assert set(manifest.redaction.counts) == set(KINDS)
    for r in records:
        assert r.reference_completion is not None and r.messages[0].role == "user"
    assert sum(s.selected for s in manifest.strata) == 60
    assert manifest.render_check.status == "not_run"


def test_stratification_matches_a_skewed_profile(tmp_path, make_profile) -> None:
    rng = random.Random(2)
    # The profile: mostly long prompts. The traffic to sample from: mostly short ones.
    profiled = flat_rows(
        rng, [rng.randint(600, 1500) if rng.random() < 0.8 else rng.randint(10, 60) for _ in range(300)]
    )
    pool = flat_rows(rng, [rng.randint(10, 60) if rng.random() < 0.85 else rng.randint(600, 1500) for _ in range(1500)])
    profile = make_profile(write_jsonl(tmp_path / "profiled.jsonl", profiled))
    traffic = write_jsonl(tmp_path / "pool.jsonl", pool)
    manifest = build_corpus(profile, traffic, tmp_path / "c.jsonl", size=150)
    d = manifest.distance
    assert d.traffic_ks_input_tokens is not None and d.traffic_ks_input_tokens > 0.5
    assert d.ks_input_tokens is not None and d.ks_input_tokens < 0.03
    assert not manifest.traffic_is_profiled_file
    long_share = np.mean([r.input_tokens >= 512 for r in _records(tmp_path / "c.jsonl")])
    assert abs(long_share - 0.8) < 0.1


def test_default_size_is_the_largest_matched_corpus(tmp_path, make_profile) -> None:
    rng = random.Random(3)
    traffic = write_jsonl(
        tmp_path / "t.jsonl", flat_rows(rng, [rng.randint(5, 3000) for _ in range(200)], code_every=3)
    )
    manifest = build_corpus(make_profile(traffic), traffic, tmp_path / "c.jsonl")
    # Profiled file, no duplicates: every record fits the profile's strata.
    assert manifest.records.total == 200
    assert manifest.distance.ks_input_tokens == pytest.approx(0.0, abs=1e-12)
    assert manifest.distance.tv_content_class == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("share", [0.0, 0.25, 0.5])
def test_heldout_share(tmp_path, make_profile, share) -> None:
    rng = random.Random(4)
    traffic = write_jsonl(tmp_path / "t.jsonl", flat_rows(rng, [rng.randint(5, 900) for _ in range(200)]))
    manifest = build_corpus(make_profile(traffic), traffic, tmp_path / "c.jsonl", heldout_share=share)
    records = _records(tmp_path / "c.jsonl")
    assert sum(r.split == "heldout" for r in records) == round(share * len(records)) == manifest.records.heldout
    assert sum(s.heldout for s in manifest.strata) == manifest.records.heldout


def test_same_seed_same_bytes_other_seed_other_sample(tmp_path, make_profile) -> None:
    rng = random.Random(5)
    traffic = write_jsonl(tmp_path / "t.jsonl", flat_rows(rng, [rng.randint(5, 900) for _ in range(300)]))
    profile = make_profile(traffic)
    a = build_corpus(profile, traffic, tmp_path / "a.jsonl", size=50, seed=1)
    b = build_corpus(profile, traffic, tmp_path / "b.jsonl", size=50, seed=1)
    c = build_corpus(profile, traffic, tmp_path / "c.jsonl", size=50, seed=2)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert a.corpus_sha256 == b.corpus_sha256 != c.corpus_sha256
    ids_a = {r.id for r in _records(tmp_path / "a.jsonl")}
    assert ids_a != {r.id for r in _records(tmp_path / "c.jsonl")}


def test_exact_and_near_duplicates_are_removed(tmp_path, make_profile) -> None:
    rng = random.Random(6)
    rows = flat_rows(rng, [rng.randint(60, 200) for _ in range(40)])
    dup = dict(rows[0], prompt=rows[0]["prompt"].upper() + "  ")  # exact after normalization
    words = rows[1]["prompt"].split()
    near = dict(rows[1], prompt=" ".join(words[:-1] + ["different"]))  # one word of many differs
    pii_twin = [dict(rows[2], prompt=f"mail {who}@example.com now") for who in ("ann", "bob")]  # equal once redacted
    traffic = write_jsonl(tmp_path / "t.jsonl", rows + [dup, near] + pii_twin)
    manifest = build_corpus(make_profile(traffic), traffic, tmp_path / "c.jsonl", size=1000)
    assert manifest.input.exact_duplicates == 2
    assert manifest.input.near_duplicates == 1
    assert manifest.records.total == 41


def test_secrets_never_reach_the_corpus_or_manifest(tmp_path, make_profile) -> None:
    rng = random.Random(7)
    secrets = {
        "email": "alice@corp.example.com", "phone": "(212) 555-0188", "ip": "172.16.5.4",
        "card": "4111 1111 1111 1111", "us_ssn": "219-45-6789", "aws_access_key_id": "AKIAIOSFODNN7EXAMPLE",
        "url_credentials": "https://bob:s3cret@git.example.com/x",
        "private_key": "-----BEGIN PRIVATE KEY-----\nMIIBVAIBADANBg\n-----END PRIVATE KEY-----",
        "password": "password: Zx9!hunter42",
        "iban": "DE89 3704 0044 0532 0130 00",
    }
    rows = flat_rows(rng, [rng.randint(20, 200) for _ in range(len(secrets) + 10)])
    for row, value in zip(rows, secrets.values(), strict=False):
        row["prompt"] += f" see {value} ok"
    rows[-1]["completion"] = "reach me at carol@corp.example.com"
    bad = '{"prompt": "leak dave@corp.example.com" '  # a bad line with a secret
    traffic = write_jsonl(tmp_path / "t.jsonl", [*rows, bad])
    manifest = build_corpus(make_profile(traffic), traffic, tmp_path / "c.jsonl", size=1000)
    assert manifest.records.total == len(secrets) + 10
    expected = dict.fromkeys(KINDS, 0) | dict.fromkeys(secrets, 1) | {"email": 2}
    assert manifest.redaction.counts == expected
    assert manifest.redaction.records_redacted == len(secrets) + 1
    assert manifest.redaction.placeholders == PLACEHOLDERS and manifest.redaction.ruleset == ruleset()
    written = (tmp_path / "c.jsonl").read_text() + (tmp_path / "c.jsonl.manifest.json").read_text()
    for value in [*secrets.values(), "carol@corp.example.com", "dave@corp.example.com", "MIIBVAIBADANBg", "s3cret",
                  "Zx9!hunter42"]:
        assert value not in written
    assert "<SECRET:private_key>" in written and "<PII:card>" in written and "password: <SECRET:password>" in written


def test_a_manifest_from_before_the_typed_kinds_still_reads(tmp_path, make_profile) -> None:
    rng = random.Random(9)
    traffic = write_jsonl(tmp_path / "t.jsonl", flat_rows(rng, [rng.randint(20, 200) for _ in range(12)]))
    manifest = build_corpus(make_profile(traffic), traffic, tmp_path / "c.jsonl")
    old = json.loads(manifest.model_dump_json())
    del old["redaction"]["ruleset"], old["redaction"]["placeholders"]
    old["redaction"]["counts"] = {"secret": 2, "email": 1}  # the kinds of redaction v1
    again = CorpusManifest.model_validate(old)
    assert again.redaction.ruleset is None and again.redaction.placeholders == {}
    assert again.redaction.counts == {"secret": 2, "email": 1}


def test_records_longer_than_max_model_len_are_left_out(tmp_path, make_profile) -> None:
    rng = random.Random(8)
    rows = flat_rows(rng, [100] * 30)
    for row in rows:
        row["output_tokens"] = 10
    rows[0]["input_tokens"] = 500
    traffic = write_jsonl(tmp_path / "t.jsonl", rows)
    manifest = build_corpus(make_profile(traffic), traffic, tmp_path / "c.jsonl", size=1000, max_model_len=200)
    assert manifest.input.skipped["too_long"] == 1
    assert manifest.records.total == 29
    assert all(r.input_tokens + r.output_tokens <= 200 for r in _records(tmp_path / "c.jsonl"))


def test_sharegpt_record_without_reply_and_openai_without_response(tmp_path, make_profile) -> None:
    rng = random.Random(9)
    rows: list[dict[str, Any]] = [
        {"conversations": [{"from": "system", "value": "be kind"}, {"from": "human", "value": random_words(rng, 9)},
                           {"from": "gpt", "value": random_words(rng, 5)}]},
        {"request": {"messages": [{"role": "user", "content": random_words(rng, 7)}]},
         "response": {"usage": {"prompt_tokens": 9, "completion_tokens": 12}}},
    ]
    traffic = write_jsonl(tmp_path / "t.jsonl", rows)
    build_corpus(make_profile(traffic), traffic, tmp_path / "c.jsonl", heldout_share=0)
    records = {r.reference_completion is None: r for r in _records(tmp_path / "c.jsonl")}
    assert [m.role for m in records[False].messages] == ["system", "user"]
    assert records[True].output_tokens == 12 and records[True].input_tokens == 9


def test_shapes_only_profile_is_skipped(tmp_path) -> None:
    profile = tmp_path / "p.json"
    profile.write_text(profile_shapes(None).model_dump_json())
    with pytest.raises(CorpusSkipped, match="shapes-only") as info:
        build_corpus(profile, tmp_path / "absent.jsonl", tmp_path / "c.jsonl")
    assert "ngram" in info.value.reason
    assert not (tmp_path / "c.jsonl").exists()


def test_bad_inputs_raise_errors_that_say_what_to_do(tmp_path, make_profile) -> None:
    rng = random.Random(10)
    traffic = write_jsonl(tmp_path / "t.jsonl", flat_rows(rng, [20, 30, 40]))
    profile = make_profile(traffic)
    with pytest.raises(ProfileUnusable, match="specdec profile"):
        build_corpus(tmp_path / "missing.json", traffic, tmp_path / "c.jsonl")
    (tmp_path / "bad.json").write_text(json.dumps({"source": "traffic"}))
    with pytest.raises(ProfileUnusable, match="not a valid PROFILE.json"):
        build_corpus(tmp_path / "bad.json", traffic, tmp_path / "c.jsonl")
    with pytest.raises(TrafficUnusable, match="cannot read traffic"):
        build_corpus(profile, tmp_path / "missing.jsonl", tmp_path / "c.jsonl")
    write_jsonl(tmp_path / "empty.jsonl", ["nope", '{"prompt": "", "input_tokens": 4}'])
    with pytest.raises(TrafficUnusable, match="no usable record"):
        build_corpus(profile, tmp_path / "empty.jsonl", tmp_path / "c.jsonl")
    for kwargs in ({"size": 0}, {"heldout_share": 1.5}, {"max_model_len": 0}):
        with pytest.raises(InvalidCorpusOptions):
            build_corpus(profile, traffic, tmp_path / "c.jsonl", **kwargs)
    assert not (tmp_path / "c.jsonl").exists()
