"""Suffix cells at submit: the arctic-inference version recorded in the source revisions where the serving
interpreter is submit's own (services/shared/suffix_package.py), read from its installed distributions.

Submit never runs a suffix cell's interpreter to ask: it is a program the campaign names, and checking a
campaign runs nothing it names. Whether the interpreter can import the package is asked by the bench-runner,
after the plan was approved and before the cell's first launch, which fails that cell by name where it cannot
(services/bench/executors/preflight.py; docs/bench-runner.md, "Suffix decoding")."""

from __future__ import annotations

from contracts.campaign import ArgvCommand, Campaign, Cell, Matrix
from services.shared import suffix_package
from services.shared.vllm_cli import vllm_console_works


def _suffix_cells(matrix: Matrix) -> list[Cell]:
    return [cell for cell in matrix.cells
            if cell.serving.speculative is not None and cell.serving.speculative.method == "suffix"]


def suffix_revision(campaign: Campaign, matrix: Matrix) -> str | None:
    """`arctic-inference==X` as submit's own interpreter has it, where that is a suffix cell's serving
    interpreter; None otherwise (no suffix cell, a Kubernetes image, another interpreter, a wrapper).
    Several versions are named together."""
    if campaign.capacity.scheduler == "kubernetes":
        return None
    found: set[str] = set()
    works: bool | None = None
    for cell in _suffix_cells(matrix):
        template = cell.vllm_sweep.serve_cmd
        if template is None and isinstance(campaign.commands.serve, ArgvCommand):
            template = campaign.commands.serve.argv
        argv = template.root if template is not None else None
        if argv and argv[0] == "vllm" and works is None:
            works = vllm_console_works()
        python = suffix_package.serving_python(argv, console_works=bool(works))
        revision = suffix_package.version_here(python) if python is not None else None
        if revision:
            found.add(revision)
    return ", ".join(sorted(found)) or None
