"""The Slurm executor: one batch job that execs the trainer's argv, no shell.

A batch script is normally read by a shell; specdec's is a Python file whose
only act is `os.execvp(argv[0], argv)` with the argv as a literal list, so no
shell ever parses an operator token. The job carries the label twice:
`--job-name specdec-<run_id>` and `--comment experiment=<run_id>`. Its stdout
and stderr are written by Slurm straight into the run's bundle, which must be
on storage shared with the node (docs/trainer-proxy.md).

The job is watched with `scontrol show job -o` (no accounting database
needed; `sacct` only when the job has aged out of the controller), stopped
with `scancel` at the timeout or the first non-finite loss, and cleaned up
after capture by its name and comment only.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from services.runtime.procs import EXPERIMENT_ENV, SERVICE_ENV
from services.trainer_proxy.errors import ExecutorError
from services.trainer_proxy.monitor import OutputWatch, RunOutcome, run_short

if TYPE_CHECKING:
    from services.trainer_proxy.plan import SlurmLaunch

JOB_SCRIPT_PATH = "training/slurm-job.py"
POLL_S = 0.5
ACTIVE_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "STAGE_OUT", "SIGNALING"})

OnStarted = Callable[[str], Awaitable[None]]


# --- rendering (pure) -------------------------------------------------------------


def job_name(run_id: str) -> str:
    return f"specdec-{run_id}"


def comment(run_id: str) -> str:
    return f"experiment={run_id}"


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


def sbatch_argv(
    *, run_id: str, node: str, partition: str | None, cwd: str, stdout: str, stderr: str, script: str, timeout_s: float
) -> list[str]:
    """The exact sbatch argv. --time backs up specdec's own timeout (whole minutes, rounded up)."""
    argv = [
        "sbatch", "--parsable",
        "--job-name", job_name(run_id),
        "--comment", comment(run_id),
        "--nodelist", node,
        "--nodes", "1",
        "--no-requeue",
        "--chdir", cwd,
        "--output", stdout,
        "--error", stderr,
        "--time", str(max(1, math.ceil(timeout_s / 60)) + 1),
    ]
    if partition:
        argv += ["--partition", partition]
    return [*argv, script]


def status_argv(job_id: str) -> list[str]:
    return ["scontrol", "show", "job", "-o", job_id]


def cancel_argv(job_id: str) -> list[str]:
    return ["scancel", job_id]


def parse_job_id(stdout: str) -> str:
    """`sbatch --parsable` prints `ID` or `ID;cluster`."""
    head = stdout.strip().splitlines()[-1].split(";")[0].strip() if stdout.strip() else ""
    if not head.isdigit():
        raise ExecutorError(f"sbatch printed {stdout.strip()!r}, not a job ID")
    return head


def parse_record(line: str) -> dict[str, str]:
    """`scontrol show job -o` (one line of Key=Value pairs) as a dict."""
    fields: dict[str, str] = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep and key and key not in fields:
            fields[key] = value
    return fields


def parse_exit(value: str) -> tuple[int | None, int | None]:
    """Slurm's `ExitCode=code:signal`; (code, signal) with a zero signal as None."""
    code, _, sig = value.partition(":")
    try:
        exit_code, signal = int(code), int(sig or 0)
    except ValueError:
        return None, None
    return (exit_code, signal or None)


def labelled_jobs(squeue_out: str, run_id: str) -> list[str]:
    """Job IDs from `squeue -h -o %i|%j|%k` whose name and comment both carry this run's label."""
    ids = []
    for line in squeue_out.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[1] == job_name(run_id) and parts[2] == comment(run_id):
            ids.append(parts[0])
    return ids


# --- execution ----------------------------------------------------------------------


def _env(run_id: str, service: str) -> dict[str, str]:
    return {**os.environ, EXPERIMENT_ENV: run_id, SERVICE_ENV: service}


async def job_state(job_id: str) -> tuple[str, str]:
    """(JobState, the raw record) of a job; falls back to sacct once scontrol forgot it."""
    result = await asyncio.to_thread(run_short, status_argv(job_id))
    if result.returncode == 0 and result.stdout.strip():
        record = result.stdout.strip()
        return parse_record(record).get("JobState", "UNKNOWN"), record
    acct = await asyncio.to_thread(
        run_short, ["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "JobID,State,ExitCode"]
    )
    line = acct.stdout.strip().splitlines()[0] if acct.returncode == 0 and acct.stdout.strip() else ""
    parts = line.split("|")
    if len(parts) == 3:
        return parts[1].split()[0], f"JobId={parts[0]} JobState={parts[1].split()[0]} ExitCode={parts[2]}"
    raise ExecutorError(
        f"Slurm no longer knows job {job_id} (scontrol: {result.stderr.strip() or 'nothing'}; sacct: "
        f"{acct.stderr.strip() or 'nothing'}); raise MinJobAge or enable accounting so its end can be read"
    )


async def run_slurm(
    launch: SlurmLaunch,
    *,
    run_id: str,
    service: str,
    run_dir: Path,
    timeout_s: float,
    kill_grace_s: float,
    on_started: OnStarted,
) -> RunOutcome:
    watch = OutputWatch({"stdout": run_dir / launch.stdout_path, "stderr": run_dir / launch.stderr_path})
    started = time.monotonic()
    submitted = await asyncio.to_thread(run_short, launch.sbatch_argv, env=_env(run_id, service))
    if submitted.returncode != 0:
        raise ExecutorError(f"sbatch exited {submitted.returncode}: {submitted.stderr.strip() or submitted.stdout.strip()}")
    job_id = parse_job_id(submitted.stdout)
    timed_out = stopped_for_loss = False
    try:
        await on_started(job_id)
        state, record = await job_state(job_id)
        while state in ACTIVE_STATES:
            if watch.poll() is not None:
                stopped_for_loss = True
                break
            if time.monotonic() - started > timeout_s:
                timed_out = True
                break
            await asyncio.sleep(POLL_S)
            state, record = await job_state(job_id)
    except BaseException:
        # The step is failing or being cancelled: the job must not run on unowned.
        run_short(cancel_argv(job_id))
        raise
    ended = time.monotonic()
    if state in ACTIVE_STATES:
        await asyncio.to_thread(run_short, cancel_argv(job_id))
        deadline = time.monotonic() + kill_grace_s + 30.0
        while state in ACTIVE_STATES and time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
            state, record = await job_state(job_id)
    exit_code, signal = parse_exit(parse_record(record).get("ExitCode", ""))
    if state != "COMPLETED" and exit_code == 0 and signal is None:
        # Cancelled, timed out or lost by the scheduler with a clean-looking code:
        # never report that as success.
        exit_code = None
    return RunOutcome(
        handle=job_id,
        launched_argv=list(launch.sbatch_argv),
        exit_code=exit_code,
        signal=signal,
        duration_s=round(ended - started, 3),
        timed_out=timed_out,
        stopped_for_loss=stopped_for_loss,
        losses=watch.finish(),
        scheduler_record=record,
    )


async def cleanup_slurm(run_id: str) -> list[str]:
    """scancel jobs still queued or running under this run's name and comment (label only)."""
    listed = await asyncio.to_thread(run_short, ["squeue", "-h", "-n", job_name(run_id), "-o", "%i|%j|%k"])
    if listed.returncode != 0:
        raise ExecutorError(f"squeue exited {listed.returncode}: {listed.stderr.strip()}")
    ids = labelled_jobs(listed.stdout, run_id)
    for job_id in ids:
        await asyncio.to_thread(run_short, cancel_argv(job_id))
    return ids
