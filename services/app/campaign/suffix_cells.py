"""Suffix cells at submit: refused where the serving interpreter cannot import arctic-inference, and the
package's version recorded in the source revisions where it can (services/shared/suffix_package.py).

Local and Slurm servers run the plan's interpreter path (on Slurm, the same path on a shared filesystem),
so the probe here asks the interpreter they will run. A Kubernetes server runs the operator's image, which
this machine cannot probe: there vLLM's own import error fails the launch, naming the package
(docs/bench-runner.md, "Suffix decoding")."""

from __future__ import annotations

from contracts.campaign import ArgvCommand, Campaign, Cell, Matrix
from services.shared import suffix_package
from services.shared.vllm_cli import vllm_console_works


def _suffix_cells(matrix: Matrix) -> list[Cell]:
    return [cell for cell in matrix.cells
            if cell.serving.speculative is not None and cell.serving.speculative.method == "suffix"]


def _probes(campaign: Campaign, matrix: Matrix) -> list[tuple[Cell, suffix_package.Probe]]:
    if campaign.capacity.scheduler == "kubernetes":
        return []
    found = []
    works: bool | None = None
    for cell in _suffix_cells(matrix):
        template = cell.vllm_sweep.serve_cmd
        if template is None and isinstance(campaign.commands.serve, ArgvCommand):
            template = campaign.commands.serve.argv
        argv = template.root if template is not None else None
        if argv and argv[0] == "vllm" and works is None:
            works = vllm_console_works()
        python = suffix_package.serving_python(argv, console_works=bool(works))
        if python is not None:
            found.append((cell, suffix_package.probe(python)))
    return found


def suffix_problems(campaign: Campaign, matrix: Matrix) -> list[str]:
    """Each suffix cell whose serving interpreter cannot import the package, in one line each."""
    return [suffix_package.refusal(cell.cell_id, probe) for cell, probe in _probes(campaign, matrix)
            if probe.version is None]


def suffix_revision(campaign: Campaign, matrix: Matrix) -> str | None:
    """`arctic-inference==X` as the suffix cells' interpreter has it; None without a probed suffix cell.
    Several interpreters with different versions are named together."""
    revisions = sorted({probe.revision for _, probe in _probes(campaign, matrix) if probe.revision})
    return ", ".join(revisions) or None
