"""Every check a campaign needs only itself and local files for, in one place: `static_problems`.

`specdec validate`, `specdec submit` and the bench planner all call it, so a campaign the planner would
refuse is refused before any step starts (docs/configuration.md#checked-before-anything-runs has the
table). Only the nodes the planner resolves at run time stay the planner's. Pure: no Redis, no bundle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contracts.campaign import Campaign, Matrix, TrafficShapes
from contracts.campaign.canonical import CanonicalRecord
from contracts.campaign.traffic import source_label
from contracts.templates import template_problems

INTERLEAVED = "warm-interleaved"

Check = Callable[..., list[str]]


def standing_problems(campaign: Campaign, matrix: Matrix, **_: Any) -> list[str]:
    """The baseline must be what is served today: the standing cell serves the campaign's standing config."""
    baseline = next(cell for cell in matrix.cells if cell.role == "standing")
    if baseline.serving.speculative == campaign.standing:
        return []
    return [f"invalid: the standing cell {baseline.cell_id} serves {baseline.serving.speculative!r} but the "
            f"campaign's standing config is {campaign.standing!r}; the baseline must be what is served today"]


def workload_shape_problems(campaign: Campaign, matrix: Matrix, *, cells_at: str = "matrix.cells",
                            **_: Any) -> list[str]:
    """A cell's `workload_shape` is the label its trials carry; the prompts come from the campaign's traffic (the
    corpus's heldout split) or its listed shapes, so a label other than theirs would be a claim."""
    problems = []
    label = source_label(campaign.traffic)
    for cell in matrix.cells:
        if cell.workload_shape is not None and cell.workload_shape != label:
            source = ("traffic.path: the corpus's heldout split" if not isinstance(campaign.traffic, TrafficShapes)
                      else f"traffic.shapes {campaign.traffic.shapes}")
            problems.append(
                f"invalid: {cells_at}[{cell.cell_id}].workload_shape is {cell.workload_shape!r}, but the prompts "
                f"come from {source}, which is {label!r}: remove workload_shape (it is derived from the prompt "
                f"source) or set it to {label!r}")
    return problems


def prompt_count_problems(campaign: Campaign, matrix: Matrix, **_: Any) -> list[str]:
    """Every listed shape is benched, so the window needs at least one prompt per shape."""
    if not isinstance(campaign.traffic, TrafficShapes):
        return []
    shapes = list(dict.fromkeys(campaign.traffic.shapes))
    if matrix.load.num_prompts >= len(shapes):
        return []
    return [f"invalid: matrix.load.num_prompts {matrix.load.num_prompts} is fewer than the {len(shapes)} "
            f"traffic.shapes {shapes}: every listed shape is benched with its share of the prompts; set num_prompts "
            f"to {len(shapes)} or more, or list fewer shapes"]


def round_problems(campaign: Campaign, matrix: Matrix, *, cells_at: str = "matrix.cells", **_: Any) -> list[str]:
    """What makes the campaign's sequential rounds (gate.max_trials) impossible; none without a cap.

    Rounds add one trial per arm and level per block of the warm-interleaved rotation, so every
    cell must be warm-interleaved; every cell runs gate.min_trials before the first look, so a
    cell's `trials` other than that would be inert (refused rather than ignored)."""
    if campaign.gate.max_trials is None:
        return []
    problems = []
    regimes = {cell.cell_id: cell.regime for cell in matrix.cells if cell.regime != INTERLEAVED}
    if regimes:
        problems.append(
            f"invalid: gate.max_trials {campaign.gate.max_trials} runs sequential rounds, one more trial of every "
            f"cell per block of the warm-interleaved rotation, but {cells_at} {regimes} are not warm-interleaved: "
            "set regime: warm-interleaved on every cell, or remove gate.max_trials to run fixed trials")
    trials = {cell.cell_id: cell.trials for cell in matrix.cells if cell.trials != campaign.gate.min_trials}
    if trials:
        problems.append(
            f"invalid: gate.max_trials {campaign.gate.max_trials} runs every cell from gate.min_trials "
            f"({campaign.gate.min_trials}) up to the cap, but {cells_at} {trials} set other trials: remove their "
            f"`trials` or set it to {campaign.gate.min_trials} (gate.min_trials), or remove gate.max_trials to run "
            "fixed trials")
    return problems


def operator_template_problems(campaign: Campaign, matrix: Matrix, *, cells_at: str = "matrix.cells",
                               canonical: CanonicalRecord | None = None, **_: Any) -> list[str]:
    """Operator serve and bench templates that would drop or contradict a declared field (contracts/templates).
    A canonical file's commands that vLLM's own parsers read (`canonical`) are left out: their declared config
    and load are what vLLM read from those very commands, so they carry them by construction."""
    if canonical is not None:
        read = {c.cell_id: c for c in canonical.cells}
        cells = []
        for cell in matrix.cells:
            record = read.get(cell.cell_id)
            sweep = {"serve_cmd": None if record and record.parsed_by_vllm else cell.vllm_sweep.serve_cmd,
                     "bench_cmd": None if record and record.bench_cmd else cell.vllm_sweep.bench_cmd}
            cells.append(cell.model_copy(update={"vllm_sweep": cell.vllm_sweep.model_copy(update=sweep)}))
        matrix = matrix.model_copy(update={"cells": cells})
    return [f"template: {p}" for p in template_problems(campaign, matrix, cells_at=cells_at)]


# Every check, in the order its problems are named. A test (tests/unit/app/campaign/test_static_checks.py) plants a
# problem for each and expects the planner and `specdec validate` to name it alike.
CHECKS: tuple[Check, ...] = (standing_problems, workload_shape_problems, prompt_count_problems, round_problems,
                             operator_template_problems)


def static_problems(campaign: Campaign, matrix: Matrix, *, cells_at: str = "matrix.cells",
                    canonical: CanonicalRecord | None = None) -> list[str]:
    """Every problem the checks find in a campaign built by the model and its matrix (inline, or read from
    matrix.path), each one line prefixed by its kind (`invalid:`, `template:`); empty when none. `cells_at` names
    where the cells are written; `canonical`, a canonical matrix file's record."""
    problems: list[str] = []
    for check in CHECKS:
        problems += check(campaign, matrix, cells_at=cells_at, canonical=canonical)
    return problems
