"""The Slurm executor: one batch job that execs the trainer's argv, no shell.

The job is labelled by name and comment, watched with `scontrol` (`sacct` once the controller forgot it),
stopped with `scancel`, and cleaned up by its labels only. Its job ID is recorded as soon as sbatch
answers, so a restarted service re-attaches to it (docs/trainer-proxy.md#executors).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from contracts import layout
from services.runtime.processes import workload_env
from services.runtime.processes.procs import DEPLOYMENT_ENV, EXPERIMENT_ENV, SERVICE_ENV
from services.shared.scheduler.runner import run_short
from services.shared.scheduler.slurm import (
    ACTIVE_STATES,
    cancel_argv,
    job_state,
    parse_exit,
    parse_job_id,
    parse_record,
)
from services.trainer_proxy.errors import ExecutorError
from services.trainer_proxy.execution.keeper import write_whole
from services.trainer_proxy.execution.monitor import OutputWatch, RunOutcome
from services.trainer_proxy.execution.progress import Reporter
from services.trainer_proxy.planning.model import SlurmLaunch

POLL_S = 0.5

OnStarted = Callable[[str], Awaitable[None]]


def _label(run_id: str, service: str) -> dict[str, str]:
    """Added to sbatch's environment, which Slurm passes on to the job."""
    deployment = os.environ.get(DEPLOYMENT_ENV)
    return {EXPERIMENT_ENV: run_id, SERVICE_ENV: service, **({DEPLOYMENT_ENV: deployment} if deployment else {})}


# Written whole once the job is submitted: what a restarted service re-attaches to.
JOB_RECORD = layout.TRAINING_SLURM_JOB_ID


async def run_slurm(
    launch: SlurmLaunch,
    *,
    run_id: str,
    service: str,
    run_dir: Path,
    timeout_s: float,
    kill_grace_s: float,
    on_started: OnStarted,
    progress: Reporter | None = None,
) -> RunOutcome:
    """Submit, watch and (at the timeout or a non-finite loss) cancel the job. Raises
    ExecutorError or a SchedulerError when Slurm refuses or loses it."""
    started_at = time.time()
    # sbatch passes its environment on to the job: the workload's, never the service's own.
    job_env = workload_env.environment(launch.env, where="commands.train.env", extra=_label(run_id, service))
    submitted = await asyncio.to_thread(run_short, launch.sbatch_argv, env=job_env, inherit=False)
    if submitted.exit_code != 0:
        raise ExecutorError(
            f"sbatch exited {submitted.exit_code}: {submitted.stderr.strip() or submitted.stdout.strip()}")
    job_id = parse_job_id(submitted.stdout)
    write_whole(str(run_dir / JOB_RECORD), {"job_id": job_id, "started_at": started_at})
    try:
        await on_started(job_id)
        return await _watch(launch, job_id, run_dir=run_dir, started_at=started_at, timeout_s=timeout_s,
                            kill_grace_s=kill_grace_s, progress=progress)
    except BaseException:
        # The step is failing or being cancelled: the job must not run on unowned.
        run_short(cancel_argv(job_id))
        raise


async def reattach_slurm(launch: SlurmLaunch, *, run_dir: Path, timeout_s: float, kill_grace_s: float,
                         progress: Reporter | None = None) -> RunOutcome | None:
    """A restarted service's watch over the job an earlier delivery submitted (a job outlives its
    service): its end as Slurm records it, or the running job watched to its end; None when no job
    was recorded. Raises a SchedulerError when Slurm no longer knows the job."""
    try:
        record = json.loads((run_dir / JOB_RECORD).read_text())
    except (OSError, ValueError):
        return None
    job_id, started_at = str(record["job_id"]), float(record["started_at"])
    try:
        return await _watch(launch, job_id, run_dir=run_dir, started_at=started_at, timeout_s=timeout_s,
                            kill_grace_s=kill_grace_s, progress=progress)
    except BaseException:
        run_short(cancel_argv(job_id))
        raise


async def _watch(
    launch: SlurmLaunch, job_id: str, *, run_dir: Path, started_at: float, timeout_s: float, kill_grace_s: float,
    progress: Reporter | None = None,
) -> RunOutcome:
    # The loss scan reads the files from their first byte: a re-attached watch misses nothing.
    watch = OutputWatch({"stdout": run_dir / launch.stdout_path, "stderr": run_dir / launch.stderr_path},
                        progress=progress.scanner if progress is not None else None)
    if progress is not None:
        progress.start(started_at)
    timed_out = stopped_for_loss = False
    state, record = await job_state(job_id)
    while state in ACTIVE_STATES:
        if watch.poll() is not None:
            stopped_for_loss = True
            break
        if time.time() - started_at > timeout_s:
            timed_out = True
            break
        if progress is not None:
            await progress.tick()
        await asyncio.sleep(POLL_S)
        state, record = await job_state(job_id)
    ended = time.time()
    if state in ACTIVE_STATES:
        await asyncio.to_thread(run_short, cancel_argv(job_id))
        deadline = time.monotonic() + kill_grace_s + 30.0
        while state in ACTIVE_STATES and time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
            state, record = await job_state(job_id)
    losses = watch.finish()
    if progress is not None:
        await progress.tick(final=True)
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
        duration_s=round(max(0.0, ended - started_at), 3),
        timed_out=timed_out,
        stopped_for_loss=stopped_for_loss,
        losses=losses,
        scheduler_record=record,
    )
