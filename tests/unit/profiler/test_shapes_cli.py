"""Named workload shapes and the `specdec profile` command."""

from __future__ import annotations

import json

import pytest

from contracts.artifacts.profile import Profile
from services.cli.main import main
from services.profiler.profile import profile_shapes
from services.shared.text.errors import UnknownShape
from services.shared.text.shapes import SHAPES


def test_all_shapes_by_default_with_their_lengths():
    p = profile_shapes(None)
    assert p.source == "shapes" and p.input.shapes == list(SHAPES)
    assert p.input_tokens.count == len(SHAPES)
    assert p.input_tokens.max == max(s.input_tokens for s in SHAPES.values())
    assert [s.name for s in p.shapes] == ["short", "medium", "long", "very-long"]
    assert p.input.sha256 is None and p.records.accepted == 0
    assert p.concurrency.mean is None and "shapes" in p.concurrency.reason
    assert p.content_mix.reason and p.repetition.reason
    assert p.recommended_method.method == "ngram"  # R5: no text, no training needed


def test_named_shapes_only_and_unknown_names():
    p = profile_shapes(["long", "short", "long"])
    assert p.input.shapes == ["long", "short"]
    assert p.input_tokens.mean == pytest.approx((SHAPES["long"].input_tokens + SHAPES["short"].input_tokens) / 2)
    with pytest.raises(UnknownShape, match="very-long"):
        profile_shapes(["huge"])


def _traffic(tmp_path, bad: int = 0):
    path = tmp_path / "traffic.jsonl"
    lines = [json.dumps({"prompt": f"q {i}", "completion": "an answer of several words here",
                         "input_tokens": 10, "output_tokens": 80}) for i in range(20)]
    path.write_text("\n".join(lines + ["bad line"] * bad) + "\n", encoding="utf-8")
    return path


def test_cli_profiles_traffic(tmp_path, capsys):
    out = tmp_path / "out" / "PROFILE.json"
    assert main(["profile", "--in", str(_traffic(tmp_path)), "--out", str(out)]) == 0
    p = Profile.model_validate_json(out.read_text())
    assert p.records.accepted == 20
    assert "20 accepted" in capsys.readouterr().out


def test_cli_threshold_failure_exits_2_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "PROFILE.json"
    assert main(["profile", "--in", str(_traffic(tmp_path, bad=5)), "--out", str(out)]) == 2
    assert not out.exists()
    err = capsys.readouterr().err
    assert "5 of 25 lines" in err and "--reject-threshold" in err
    assert (
        main(["profile", "--in", str(tmp_path / "traffic.jsonl"), "--out", str(out), "--reject-threshold", "0.5"]) == 0
    )
    assert Profile.model_validate_json(out.read_text()).records.reject_threshold == 0.5


def test_cli_sample_cap_and_tokenizer_reach_the_profile(tmp_path):
    out = tmp_path / "PROFILE.json"
    assert main(["profile", "--in", str(_traffic(tmp_path)), "--out", str(out), "--sample-cap", "4"]) == 0
    assert Profile.model_validate_json(out.read_text()).sampling.cap == 4
    assert (
        main(["profile", "--in", str(tmp_path / "traffic.jsonl"), "--out", str(out), "--tokenizer", str(tmp_path)]) == 2
    )


def test_cli_shapes(tmp_path, capsys):
    out = tmp_path / "PROFILE.json"
    assert main(["profile", "--aa-shapes", "--out", str(out)]) == 0
    assert Profile.model_validate_json(out.read_text()).input.shapes == list(SHAPES)
    assert main(["profile", "--aa-shapes", "short", "medium", "--out", str(out)]) == 0
    assert Profile.model_validate_json(out.read_text()).input.shapes == ["short", "medium"]
    assert main(["profile", "--aa-shapes", "nope", "--out", str(out)]) == 2
    assert "unknown workload shape" in capsys.readouterr().err


def test_cli_refuses_traffic_flags_with_shapes_and_missing_input(tmp_path, capsys):
    out = tmp_path / "PROFILE.json"
    assert main(["profile", "--aa-shapes", "--reject-threshold", "0.1", "--out", str(out)]) == 2
    assert "--reject-threshold applies to --in" in capsys.readouterr().err
    assert main(["profile", "--in", str(tmp_path / "absent.jsonl"), "--out", str(out)]) == 2
    assert not out.exists()
    with pytest.raises(SystemExit):
        main(["profile", "--out", str(out)])  # neither --in nor --aa-shapes: argparse usage error
