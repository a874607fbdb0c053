"""The Slurm serving executor: one labelled batch job per launch of a bench plan.

The runner cannot pick a free port on another node, so the job script does and writes an endpoint file
into the launch folder: the bundle must be on storage shared with the node. Cleanup is by the run's label
(job name and comment) only, before the first launch and after the last (docs/bench-runner.md#slurm)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import structlog

from contracts.catalogue import BENCH as SERVICE
from services.bench.errors import ServerDied, ServerNotReady, ServingError
from services.bench.executors.executor import log_tail, read_log_text
from services.bench.planning.model import CellPlan, Launch, SlurmServe
from services.runtime.bundle.bundle import BundleStore
from services.runtime.processes.procs import DEPLOYMENT_ENV, EXPERIMENT_ENV, SERVICE_ENV
from services.shared.scheduler.errors import SchedulerError
from services.shared.scheduler.health import wait_healthy
from services.shared.scheduler.runner import RunResult, run_short
from services.shared.scheduler.slurm import (
    ACTIVE_STATES,
    cancel_labelled,
    job_state,
    parse_exit,
    parse_job_id,
    parse_record,
)
from services.shared.secret_args import mask_argv

POLL_S = 0.5
# How long a cancelled job may take to leave the queue before stop() gives up waiting.
STOP_WAIT_S = 30.0


def read_endpoint(path: Path) -> dict[str, Any] | None:
    """The endpoint file, or None until the job has written it (it is replaced atomically)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ServingError(f"the serving job's endpoint file {path} is unreadable: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("host"), str) or not isinstance(data.get("port"), int):
        raise ServingError(f"the serving job's endpoint file {path} lacks host and port: {data!r}")
    return data


def _fill(argv: list[str], job_id: str) -> list[str]:
    return [token.replace("{job_id}", job_id) for token in argv]


async def _short(argv: list[str], *, env: Mapping[str, str] | None = None, inherit: bool = True) -> RunResult:
    """A scheduler command; what keeps it from answering fails the launch (ServingError)."""
    try:
        return await asyncio.to_thread(run_short, argv, env=env, inherit=inherit)
    except SchedulerError as exc:
        raise ServingError(str(exc)) from None


class SlurmServed:
    """A submitted serving job: where it answers once ready, and how it is stopped."""

    def __init__(self, launch: SlurmServe, job_id: str, run_dir: Path) -> None:
        self.launch = launch
        self.job_id = job_id
        self.run_dir = run_dir
        self.base_url = ""
        self.files = [launch.log_path, launch.endpoint_path]

    def record(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "sbatch_argv": self.launch.sbatch_argv,
            "job_script": self.launch.job_script_path,
        }

    async def log_text(self) -> str:
        # Slurm writes the job's output to the bundle (shared storage) as it runs.
        return await asyncio.to_thread(read_log_text, self.run_dir / self.launch.log_path)

    async def state(self) -> tuple[str, dict[str, str]]:
        """The job's state and record, read as the trainer-proxy reads its jobs (scontrol,
        then sacct once the controller forgot the job)."""
        try:
            state, record = await job_state(self.job_id)
        except SchedulerError as exc:
            raise ServingError(str(exc)) from None
        return state, parse_record(record)

    def _ended(self, state: str, record: dict[str, str], what: str) -> ServerDied:
        code, signal = parse_exit(record.get("ExitCode", ""))
        why = record.get("Reason", "")
        return ServerDied(
            f"slurm job {self.job_id} ({self.launch.job_name}) {what}: state {state}, exit code {code}, "
            f"signal {signal}{f', reason {why}' if why and why != 'None' else ''}; sbatch argv: "
            f"{self.launch.sbatch_argv}\nlog tail:\n{log_tail(self.run_dir / self.launch.log_path)}"
        )

    async def wait_ready(self, timeout_s: float, poll_s: float = POLL_S) -> float:
        """Seconds from here until /health answered 200 at the endpoint the job wrote."""
        seen: dict[str, Any] = {"state": "UNKNOWN", "record": {}, "endpoint": None}

        async def locate() -> str | None:
            state, record = await self.state()
            seen.update(state=state, record=record)
            if state not in ACTIVE_STATES:
                raise self._ended(state, record, "ended before its server was ready")
            if seen["endpoint"] is None:
                seen["endpoint"] = read_endpoint(self.run_dir / self.launch.endpoint_path)
                if seen["endpoint"] is not None:
                    self.base_url = f"http://{seen['endpoint']['host']}:{seen['endpoint']['port']}"
            return self.base_url if seen["endpoint"] is not None else None

        def not_ready() -> ServerNotReady:
            where = f"at {self.base_url}" if seen["endpoint"] else "(no endpoint file yet)"
            return ServerNotReady(
                f"slurm job {self.job_id} did not answer /health {where} within {timeout_s:.0f}s "
                f"(state {seen['state']}, reason {seen['record'].get('Reason', 'unknown')}); sbatch argv: "
                f"{self.launch.sbatch_argv}\nlog tail:\n{log_tail(self.run_dir / self.launch.log_path)}"
            )

        return await wait_healthy(locate, timeout_s=timeout_s, poll_s=poll_s, not_ready=not_ready)

    async def stop(self) -> None:
        """scancel, then wait (bounded) until the job has left the active states. A job still
        active after that is logged; the step's label-selected cleanup cancels it again."""
        cancelled = await _short(_fill(self.launch.cancel_argv, self.job_id))
        deadline = time.monotonic() + STOP_WAIT_S
        state = "UNKNOWN"
        while time.monotonic() < deadline:
            state, _ = await self.state()
            if state not in ACTIVE_STATES:
                return
            await asyncio.sleep(POLL_S)
        structlog.get_logger().bind(service=SERVICE, job_id=self.job_id).warning(
            "serving job still active after scancel", state=state, scancel_exit=cancelled.exit_code,
            scancel_stderr=cancelled.stderr.strip()[-500:])


class SlurmExecutor:
    """Serves each launch as the batch job its plan shows."""

    def __init__(self, run_id: str, bundle: BundleStore) -> None:
        self.run_id = run_id
        self.bundle = bundle
        self.run_dir = bundle.run_dir(run_id).absolute()

    def _label(self) -> dict[str, str]:
        """Added to sbatch's environment, which Slurm passes on to the job."""
        deployment = os.environ.get(DEPLOYMENT_ENV)
        return {
            EXPERIMENT_ENV: self.run_id,
            SERVICE_ENV: SERVICE,
            **({DEPLOYMENT_ENV: deployment} if deployment else {}),
        }

    async def prepare(self) -> list[str]:
        return await self.cleanup()

    async def start(self, index: int, step: Launch, cell: CellPlan, folder: str) -> SlurmServed:
        block = step.slurm
        if block is None:
            raise ServingError(f"launch {index} of the plan has no Slurm job; re-plan the bench step")
        # Written through the bundle (hashed) and byte for byte what the plan shows.
        self.bundle.write_bytes(self.run_id, block.job_script_path, block.job_script.encode("utf-8"))
        # An endpoint file left by an earlier delivery of this step would point at a dead job.
        (self.run_dir / block.endpoint_path).unlink(missing_ok=True)
        # sbatch passes its environment on to the job: the workload's (the cell's declared names), not the service's.
        job_env = cell.workload_env(extra=self._label())
        submitted = await _short(block.sbatch_argv, env=job_env, inherit=False)
        if submitted.exit_code != 0:
            raise ServingError(
                f"sbatch exited {submitted.exit_code}: {submitted.stderr.strip() or submitted.stdout.strip()}; "
                f"argv: {mask_argv(block.sbatch_argv)}"
            )
        try:
            job_id = parse_job_id(submitted.stdout)
        except SchedulerError as exc:
            raise ServingError(str(exc)) from None
        return SlurmServed(block, job_id, self.run_dir)

    async def cleanup(self) -> list[str]:
        """scancel every job still queued or running under this run's name and comment."""
        try:
            return [f"scancel {job}" for job in await cancel_labelled(self.run_id)]
        except SchedulerError as exc:
            raise ServingError(str(exc)) from None
