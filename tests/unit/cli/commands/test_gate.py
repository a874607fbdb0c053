"""`specdec gate` through its argparse registration, on files."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import orjson
import pytest

from contracts.artifacts.decision import Decision
from contracts.campaign import SpeculativeConfig
from services.cli.commands import gate
from services.gate.simulate import NoiseModel, identity, spec_counters, trial_result

NGRAM = SpeculativeConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_min=2, prompt_lookup_max=4)
QUIET = NoiseModel(trial_cv=0.01, request_cv=0.05)


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="specdec")
    gate.register(parser.add_subparsers(required=True))
    args = parser.parse_args(["gate", *argv])
    return args.func(args)


def write_cell(root: Path, cell: str, *, factor: float = 1.0, seed: int = 0, plain: bool = False) -> None:
    rng = np.random.default_rng(seed)
    standing = cell == "standing"
    for i in range(3):
        ident = None if plain else identity(
            cell, concurrency=1, trial=i, speculative=None if standing else NGRAM,
            baseline_cell_id=None if standing else "standing",
        )  # fmt: skip
        raw = trial_result(
            rng, factor=factor, noise=QUIET, ident=ident, counters=None if standing else spec_counters(0.6, 3)
        )
        path = root / cell / f"trial-{i}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps(raw))


def test_promotes_prints_and_writes_the_decision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_cell(tmp_path, "standing", seed=1)
    write_cell(tmp_path, "ngram", factor=0.75, seed=2)
    out = tmp_path / "DECISION.json"
    rc = run(
        "--baseline", str(tmp_path / "standing/*.json"), "--candidate", str(tmp_path / "ngram/*.json"),
        "--objective", "tpot", "--acceptance-floor", "0.5", "--out", str(out),
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert rc == 0
    assert "decision: promote (winner: ngram)" in printed and "tpot:median" in printed
    decision = Decision.model_validate_json(out.read_text())
    assert decision.decision == "promote" and decision.winner == "ngram"


def test_reject_and_inconclusive_also_exit_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_cell(tmp_path, "standing", seed=1)
    write_cell(tmp_path, "slow", factor=1.4, seed=2)
    args = [
        "--baseline",
        str(tmp_path / "standing/*.json"),
        "--candidate",
        str(tmp_path / "slow/*.json"),
        "--objective",
        "tpot",
    ]
    assert run(*args, "--acceptance-floor", "0.5") == 0
    assert "decision: reject" in capsys.readouterr().out
    assert run(*args, "--acceptance-floor", "0.5", "--min-trials", "4") == 0
    assert "decision: inconclusive" in capsys.readouterr().out


def test_one_glob_with_several_cells_and_named_plain_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_cell(tmp_path / "base", "standing", seed=1)
    write_cell(tmp_path / "cands", "a", factor=0.7, seed=2)
    write_cell(tmp_path / "cands", "b", factor=0.9, seed=3)
    write_cell(tmp_path / "plain", "p", factor=0.7, seed=4, plain=True)
    out = tmp_path / "d.json"
    rc = run(
        "--baseline", str(tmp_path / "base/**/*.json"), "--candidate", str(tmp_path / "cands/**/*.json"),
        "--candidate", f"vanilla={tmp_path / 'plain/**/*.json'}", "--objective", "tpot:p99",
        "--acceptance-floor", "0.5", "--out", str(out),
    )  # fmt: skip
    assert rc == 0
    decision = Decision.model_validate_json(out.read_text())
    assert {c.candidate for c in decision.candidates} == {"a", "b", "vanilla"}
    assert "hardware" in decision.unchecked_identity_fields


def test_unreadable_input_exits_non_zero_with_the_file_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_cell(tmp_path, "ngram", seed=2)
    (tmp_path / "broken.json").write_text("{")
    rc = run("--baseline", str(tmp_path / "broken.json"), "--candidate", str(tmp_path / "ngram/*.json"),
             "--objective", "tpot", "--acceptance-floor", "0.5")  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and "broken.json" in err and "not JSON" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--baseline", "/nonexistent/*.json"], "no file matches"),
        (["--objective", "latency"], "objective"),
        (["--acceptance-floor", "1.5"], "acceptance_floor"),
        (["--objective", "output_throughput"], "is not a latency metric"),
        (["--guard", "acceptance_rate:p99"], "one figure per trial"),
    ],
)
def test_bad_arguments_exit_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    write_cell(tmp_path, "standing", seed=1)
    write_cell(tmp_path, "ngram", seed=2)
    base = {"--baseline": str(tmp_path / "standing/*.json"), "--candidate": str(tmp_path / "ngram/*.json"),
            "--objective": "tpot", "--acceptance-floor": "0.5"}  # fmt: skip
    base.update(dict(zip(extra[::2], extra[1::2], strict=False)))
    assert run(*(x for kv in base.items() for x in kv)) == 2
    assert message in capsys.readouterr().err


def test_the_floors_are_exclusive_and_one_is_required(tmp_path: Path) -> None:
    common = ["--baseline", "x", "--candidate", "y", "--objective", "tpot"]
    with pytest.raises(SystemExit):
        run(*common)
    with pytest.raises(SystemExit):
        run(*common, "--acceptance-floor", "0.5", "--acceptance-length-floor", "2")


def test_a_guard_rejects_a_candidate_worse_on_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_cell(tmp_path, "standing", seed=1)
    write_cell(tmp_path, "ngram", factor=0.75, seed=2)
    for path in (tmp_path / "ngram").glob("*.json"):  # the candidate pays for its TPOT with half the throughput
        raw = orjson.loads(path.read_bytes())
        path.write_bytes(orjson.dumps({**raw, "output_throughput": raw["output_throughput"] / 2.5}))
    args = ["--baseline", str(tmp_path / "standing/*.json"), "--candidate", str(tmp_path / "ngram/*.json"),
            "--objective", "tpot", "--acceptance-floor", "0.5"]
    assert run(*args) == 0
    assert "decision: promote" in capsys.readouterr().out
    out = tmp_path / "d.json"
    assert run(*args, "--guard", "output_throughput", "--guard", "ttft:p99", "--out", str(out)) == 0
    printed = capsys.readouterr().out
    assert "decision: reject" in printed and "guards: output_throughput, ttft:p99" in printed
    assert "guard output_throughput is worse beyond the noise" in printed
    decision = Decision.model_validate_json(out.read_text())
    assert decision.gate.guards == ["output_throughput", "ttft:p99"]
    assert [g.passed for g in decision.candidates[0].levels[0].guards] == [False, True]
