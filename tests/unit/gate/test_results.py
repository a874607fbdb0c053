"""Reading trial result files: bad files, named at once; the objective a gate spec names.

(Parsing one result, vLLM's format with and without detail and specdec's blocks,
is contracts.artifacts.results: tests/unit/contracts/artifacts/test_trials.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from services.gate import GateSpecError, ResultFileError, load_trials
from services.gate.metrics import parse_guards, parse_objective
from services.gate.simulate import identity, trial_result


def _write(path: Path, data: object) -> Path:
    path.write_bytes(orjson.dumps(data))
    return path


def test_identity_concurrency_must_match_max_concurrency(tmp_path: Path) -> None:
    raw = trial_result(np.random.default_rng(9), concurrency=4, ident=identity("standing", concurrency=2, trial=0))
    with pytest.raises(ResultFileError, match="identity.concurrency 2 disagrees with max_concurrency 4"):
        load_trials([_write(tmp_path / "t.json", raw)])


def test_every_unreadable_file_is_named_at_once(tmp_path: Path) -> None:
    good = _write(tmp_path / "good.json", trial_result(np.random.default_rng(10), detailed=False))
    not_json = tmp_path / "broken.json"
    not_json.write_text("{not json")
    no_completed = _write(tmp_path / "nocompleted.json", {"median_tpot_ms": 1.0})
    many = _write(tmp_path / "appended.json", [1, 2])
    bad_identity = _write(tmp_path / "badid.json", {"completed": 3, "identity": {"model": "m"}})
    missing = tmp_path / "missing.json"
    with pytest.raises(ResultFileError) as err:
        load_trials([good, not_json, no_completed, many, bad_identity, missing])
    problems = err.value.problems
    assert len(problems) == 5
    for path in (not_json, no_completed, many, bad_identity, missing):
        assert any(str(path) in p for p in problems)
    assert "malformed specdec block" in str(err.value)


@pytest.mark.parametrize(
    ("text", "name"),
    [("tpot", "tpot:median"), ("tpot:p99.0", "tpot:p99"), ("itl:p99.9", "itl:p99.9"), ("e2el:mean", "e2el:mean")],
)
def test_objective_parsing(text: str, name: str) -> None:
    assert parse_objective(text).name == name


@pytest.mark.parametrize("text", ["output_throughput", "acceptance_rate", "acceptance_length"])
def test_the_gate_itself_refuses_an_objective_that_is_not_a_latency(text: str) -> None:
    # GateSpec refuses it at submit; the gate holds too for a spec built without validation.
    with pytest.raises(GateSpecError, match=f"objective '{text}' is not a latency metric.*can be a guard"):
        parse_objective(text)


@pytest.mark.parametrize(
    ("text", "name"),
    [("output_throughput", "output_throughput"), ("acceptance_rate", "acceptance_rate"), ("ttft:p99", "ttft:p99"),
     ("ttft", "ttft:median")],
)
def test_guard_parsing(text: str, name: str) -> None:
    assert [k.name for k in parse_guards([text])] == [name]
    with pytest.raises(GateSpecError, match="one figure per trial"):
        parse_guards(["acceptance_rate:median"])
