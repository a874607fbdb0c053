"""The Slurm serve job of a bench launch (pure rendering, into the plan, so an approval covers it).

The job script is `infra/slurm/serve.sbatch` with the run ID and the serve
argv's literal filled in; the sbatch argv is the shared one
(services.shared.scheduler.slurm), with the run's label, pinned to the plan's
node. No shell reads either: the script is Python that binds a free port on
its node, fills it into the argv, writes the endpoint file into the launch's
bundle folder and execs (services.bench.executors.slurm waits for that file).
"""

from __future__ import annotations

from pathlib import Path

from contracts import layout
from contracts.argv import render_token
from contracts.selectors import GRES, PARTITION, problems
from services.bench.errors import ServingError
from services.bench.planning.model import SlurmServe
from services.runtime.bundle.bundle_paths import validate_run_id
from services.runtime.errors import ConfigurationError
from services.shared.scheduler import slurm

TEMPLATE = Path(__file__).resolve().parents[3] / "infra/slurm/serve.sbatch"


def job_script(argv: list[str], *, run_id: str, template: str | None = None) -> str:
    """infra/slurm/serve.sbatch filled in: the validated run ID and repr() of the argv
    (a Python literal that reads back every character exactly)."""
    validate_run_id(run_id)
    if not argv or not all(isinstance(token, str) for token in argv):
        raise ServingError("a serve argv must be a non-empty list of strings")
    text = TEMPLATE.read_text(encoding="utf-8") if template is None else template
    return render_token(text, {"run_id": run_id, "argv_literal": repr(list(argv))})


def sbatch_argv(
    *, run_id: str, node: str, selectors: dict[str, str], cwd: str, log: str, script: str, endpoint: str
) -> list[str]:
    """The exact sbatch argv. No --time: how long a measurement takes is not known
    up front; the job is cancelled after its cell, and the partition's limit applies.
    capacity.selectors.partition and .gres (the generic resources the server needs,
    e.g. gpu:1) become --partition and --gres; nodelist is the capacity step's alone
    (the job is pinned to the selected node)."""
    found = problems("slurm", selectors)
    if found:
        # The capacity step may not have run for this bench: refuse before anything is approved.
        raise ConfigurationError("; ".join(found))
    return slurm.sbatch_argv(
        run_id=run_id, node=node, cwd=cwd, stdout=log, stderr=log, script=[script, endpoint], ntasks=1,
        partition=selectors.get(PARTITION), gres=selectors.get(GRES),
    )


def render_launch(
    argv: list[str], *, run_id: str, node: str, selectors: dict[str, str], run_dir: str, cwd: str, folder: str
) -> SlurmServe:
    """The Slurm block of one launch; `folder` is the launch's bundle folder."""
    script_rel, log_rel, endpoint_rel = (
        f"{folder}/{name}" for name in (layout.SLURM_SERVE_JOB, layout.SERVER_LOG, layout.SLURM_ENDPOINT)
    )
    return SlurmServe(
        job_name=slurm.job_name(run_id),
        comment=slurm.comment(run_id),
        node=node,
        job_script=job_script(argv, run_id=run_id),
        job_script_path=script_rel,
        sbatch_argv=sbatch_argv(
            run_id=run_id, node=node, selectors=selectors, cwd=cwd, log=f"{run_dir}/{log_rel}",
            script=f"{run_dir}/{script_rel}", endpoint=f"{run_dir}/{endpoint_rel}",
        ),
        log_path=log_rel,
        endpoint_path=endpoint_rel,
        status_argv=slurm.status_argv("{job_id}"),
        cancel_argv=slurm.cancel_argv("{job_id}"),
    )
