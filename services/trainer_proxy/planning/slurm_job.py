"""The Slurm batch script of a training plan (pure): it execs the trainer's argv, no shell.

A batch script is normally read by a shell; specdec's is a Python file whose
only act is `os.execvp(argv[0], argv)` with the argv as a literal list, so no
shell ever parses an operator token. The sbatch argv that submits it, with
the run's label, is the shared one (services.shared.scheduler.slurm).
"""

from __future__ import annotations

from services.runtime.processes.procs import EXPERIMENT_ENV, SERVICE_ENV


def job_script(argv: list[str], *, run_id: str, service: str) -> str:
    """The batch script: Python that execs argv directly. repr() of a list of
    str is a Python literal that round-trips every character (a JSON literal
    would turn characters outside the BMP into lone surrogates)."""
    literal = repr(list(argv))
    return (
        "#!/usr/bin/env python3\n"
        f"# specdec training job for run {run_id} (label experiment={run_id}).\n"
        "# Execs the operator's trainer argv directly: no shell parses any token.\n"
        "import os\n"
        f"ARGV = {literal}\n"
        f"os.environ[{EXPERIMENT_ENV!r}] = {run_id!r}\n"
        f"os.environ[{SERVICE_ENV!r}] = {service!r}\n"
        "os.execvp(ARGV[0], ARGV)\n"
    )
