"""The named inputs of `<step>.requested` (contracts/inputs.py): one row per step, and
a request event naming an input its step does not read is refused when built."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import ValidationError

from contracts.envelope import ArtifactRef
from contracts.events import REQUESTED, STEPS
from contracts.inputs import CORPUS, STEP_INPUTS, TRAINING_OUTPUT, input_problem

ROOT = Path(__file__).resolve().parents[3]
REF = ArtifactRef(uri="bundle://toy-20261130-010101-abcdef/corpus/CORPUS.jsonl", sha256="a" * 64, size_bytes=1)


def test_every_step_has_a_row():
    assert list(STEP_INPUTS) == list(STEPS) == list(REQUESTED)
    assert {name for names in STEP_INPUTS.values() for name in names} == {CORPUS, TRAINING_OUTPUT}


@pytest.mark.parametrize("step", STEPS)
def test_a_request_takes_exactly_the_names_its_step_reads(step):
    model = REQUESTED[step]
    for name in STEP_INPUTS[step]:
        assert set(model(run_id="r-1", producer="t", requested_by="t", inputs={name: REF}).inputs) == {name}
    with pytest.raises(ValidationError, match="reads no input named|reads no named input"):
        model(run_id="r-1", producer="t", requested_by="t", inputs={"trainng.output": REF})


def test_the_problem_lists_the_known_names_or_says_there_are_none():
    assert input_problem("bench", [TRAINING_OUTPUT, CORPUS]) is None
    problem = input_problem("bench", ["trainng.output"])
    assert problem is not None and "['trainng.output']" in problem
    assert "training.output (the trained draft" in problem and "corpus (a CORPUS.jsonl" in problem
    none = input_problem("gate", [CORPUS])
    assert none is not None and "the gate step reads no named input" in none and "drop --input" in none


def _named(node: ast.expr, consts: dict[str, str]) -> str:
    """A literal name, or the constant it is spelled by."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    assert isinstance(node, ast.Name), ast.dump(node)
    return consts[node.id]


def _input_names_read(path: Path) -> set[str]:
    """Names a step's code looks up in a request's inputs: `_request_input(event, NAME)` and `... in event.inputs`."""
    tree = ast.parse(path.read_text())
    consts = {"CORPUS": CORPUS, "TRAINING_OUTPUT": TRAINING_OUTPUT}
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_request_input":
            names.add(_named(node.args[1], consts))
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "inputs":
            names.add(_named(node.slice, consts))
    return names


def test_the_table_is_what_the_steps_read():
    # The trainer-proxy and the bench-runner are the steps that read named inputs; the publisher refuses any.
    assert _input_names_read(ROOT / "services/bench/planning/staging.py") == set(STEP_INPUTS["bench"])
    assert _input_names_read(ROOT / "services/trainer_proxy/planning/staging.py") == set(STEP_INPUTS["training"])
    for step in ("profiler", "corpus", "capacity", "gate"):
        assert "inputs" not in (ROOT / f"services/{step}/app.py").read_text(), f"{step} reads inputs: add its row"
