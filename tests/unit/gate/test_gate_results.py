"""Reading trial result files: bad files, named at once; the objective a gate spec names.

(Parsing one result, vLLM's format with and without detail and specdec's blocks,
is contracts.results: tests/unit/contracts/test_results_trial.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from services.gate import ResultFileError, load_trials
from services.gate.metrics import parse_objective
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
    ("text", "name", "note"),
    [
        ("tpot", "tpot:median", False),
        ("tpot:p99.0", "tpot:p99", False),
        ("itl:p99.9", "itl:p99.9", False),
        ("e2el:mean", "e2el:mean", False),
        ("output_throughput", "output_throughput", False),
        ("acceptance_rate:median", "acceptance_rate", True),
    ],
)
def test_objective_parsing(text: str, name: str, note: bool) -> None:
    key, why = parse_objective(text)
    assert key.name == name and (why is not None) == note
