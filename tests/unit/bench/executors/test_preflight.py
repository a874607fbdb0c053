"""The bench-runner asks a suffix cell's serving interpreter whether it imports arctic-inference before the
cell's first launch (services/bench/executors/preflight.py), and fails that cell by name where it cannot:
nothing is launched for it, the other cells go on. Tiny interpreter stand-ins (shell scripts named python-*)
answer as a Python without and with the package would; BenchRun runs over the fake executor of
tests/unit/bench/test_run_interleaved.py."""

from __future__ import annotations

from pathlib import Path

from contracts import layout
from contracts.campaign import Campaign, Matrix
from services.bench.executors import preflight
from services.bench.planning.builder import build_plan
from services.bench.planning.model import BenchPlan
from tests.unit.bench.planning.test_plan import example
from tests.unit.bench.test_run_interleaved import RUN, wired  # noqa: F401 - the fixture

SERVER = ["-m", "vllm.entrypoints.openai.api_server", "--port", "{port}"]


def _interpreter(path: Path, *, has_package: bool, marker: Path | None = None) -> Path:
    body = "echo 0.3.0" if has_package else (
        "echo \"ModuleNotFoundError: No module named 'arctic_inference'\" >&2\nexit 1")
    touch = f"touch {marker}\n" if marker else ""
    path.write_text(f"#!/bin/sh\n{touch}{body}\n")
    path.chmod(0o755)
    return path


def suffix_plan(python: Path, *, executor: str = "local") -> BenchPlan:
    """The example's cells with ngram-k3 serving suffix, its server run by `python`."""
    data = example()
    cell = next(c for c in data["matrix"]["cells"] if c["cell_id"] == "ngram-k3")
    cell["cell_id"] = "suffix-k3"
    cell["serving"]["speculative"] = {"method": "suffix", "num_speculative_tokens": 3}
    campaign = Campaign.model_validate(data)
    assert isinstance(campaign.matrix, Matrix)
    plan = build_plan(campaign, campaign.matrix, run_id=RUN, default_node="n1", training_output="/drafts/d",
                      prompts={"source": layout.BENCH_PROMPTS})
    cells = [c.model_copy(update={"serve_argv": [str(python), *SERVER]}) if c.cell_id == "suffix-k3" else c
             for c in plan.cells]
    return plan.model_copy(update={"cells": cells, "executor": executor})


async def test_a_suffix_cell_whose_interpreter_lacks_the_package_fails_by_name_before_launch(wired, tmp_path):  # noqa: F811
    make, executor, events, bundle = wired
    python = _interpreter(tmp_path / "python-no-arctic", has_package=False)
    outcome = await make(suffix_plan(python)).execute()
    assert list(outcome.failed_cells) == ["suffix-k3"]
    why = outcome.failed_cells["suffix-k3"]
    assert why.startswith("cell suffix-k3 serves speculative method suffix, but ")
    assert str(python) in why and "No module named 'arctic_inference'" in why
    assert "nothing was launched for it" in why and "infra/bin/build-arctic-inference" in why
    started = [entry[1] for entry in executor.log if entry[0] == "start"]
    assert "suffix-k3" not in started and sorted(started) == ["draft-k3", "standing"]
    assert {e["cell_id"] for e in events} == {"draft-k3", "standing"}


def test_an_interpreter_that_imports_the_package_passes(tmp_path):
    python = _interpreter(tmp_path / "python-with-arctic", has_package=True)
    assert preflight.suffix_failures_now(suffix_plan(python)) == {}
    assert preflight.probe(str(python)).version == "0.3.0"


def test_a_kubernetes_plan_runs_no_interpreter_here(tmp_path):
    marker = tmp_path / "ran"
    python = _interpreter(tmp_path / "python-no-arctic", has_package=False, marker=marker)
    assert preflight.suffix_failures_now(suffix_plan(python, executor="kubernetes")) == {}
    assert not marker.exists()
