"""`specdec corpus` end to end on a small file, through the real `specdec` parser."""

from __future__ import annotations

import hashlib
import json
import random

from services.cli.main import main
from services.profiler.profile import profile_shapes
from tests.unit.corpus.conftest import flat_rows, write_jsonl


def test_cli_writes_corpus_and_manifest(tmp_path, make_profile, make_tokenizer, capsys) -> None:
    rng = random.Random(11)
    rows = flat_rows(rng, [rng.randint(5, 300) for _ in range(80)], code_every=5)
    rows[3]["prompt"] += " token sk-abcdefghijklmnopqrstuvwx"
    traffic = write_jsonl(tmp_path / "traffic.jsonl", rows)
    profile = make_profile(traffic)
    out = tmp_path / "bundle" / "CORPUS.jsonl"
    rc = main([
        "corpus", "--profile", str(profile), "--traffic", str(traffic), "--out", str(out),
        "--tokenizer", str(make_tokenizer()), "--size", "40", "--heldout-share", "0.2", "--seed", "3",
        "--max-model-len", "4096",
    ])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "32 train, 8 heldout" in printed and "render check passed" in printed
    manifest = json.loads((tmp_path / "bundle" / "CORPUS.jsonl.manifest.json").read_text())
    assert manifest["corpus_sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert manifest["records"] == {"train": 32, "heldout": 8, "total": 40}
    assert manifest["seed"] == 3 and manifest["size_requested"] == 40
    assert manifest["render_check"]["max_model_len"] == 4096
    assert "sk-abcdefghijklmnopqrstuvwx" not in out.read_text()
    lines = out.read_text().splitlines()
    assert len(lines) == 40 and all(set(json.loads(x)) == {
        "id", "messages", "reference_completion", "input_tokens", "output_tokens", "content_class", "split"
    } for x in lines)


def test_cli_shapes_only_profile_exits_3_and_writes_nothing(tmp_path, capsys) -> None:
    profile = tmp_path / "p.json"
    profile.write_text(profile_shapes(None).model_dump_json())
    out = tmp_path / "CORPUS.jsonl"
    rc = main(["corpus", "--profile", str(profile), "--traffic", str(tmp_path / "t.jsonl"), "--out", str(out)])
    assert rc == 3
    assert "skipped" in capsys.readouterr().err
    assert not out.exists()


def test_cli_error_exits_2_with_the_reason(tmp_path, make_profile, capsys) -> None:
    traffic = write_jsonl(tmp_path / "t.jsonl", flat_rows(random.Random(1), [10, 20]))
    rc = main(["corpus", "--profile", str(make_profile(traffic)), "--traffic", str(traffic),
               "--out", str(tmp_path / "c.jsonl"), "--heldout-share", "2"])
    assert rc == 2
    assert "--heldout-share must be between 0 and 1" in capsys.readouterr().err
