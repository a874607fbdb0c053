"""The Slurm serving executor: one labelled batch job per launch of a bench plan.

Rendering (pure, into the plan, so an approval covers it): the job script is
`infra/slurm/serve.sbatch` with the run ID and the serve argv's literal filled
in, and the exact sbatch argv. No shell reads either: the script is Python that
execs the argv. The job carries the label twice, `--job-name specdec-<run_id>`
and `--comment experiment=<run_id>`, and is pinned to the plan's node.

The bench-runner cannot pick a free port on another node, so the job script
does: it binds port 0, fills the port into the argv, writes an endpoint file
(host, port, argv, job ID) into the launch's bundle folder and execs. The
bundle must be on storage shared with the node: Slurm writes the server's log
there too. The runner waits for the endpoint file, then for /health, watching
the job's state; it stops the job with scancel once the cell's results are
captured, and cleans up by the label (squeue name and comment) at the end of
the step, whatever happened, and before the first launch (a restarted runner
cancels what an interrupted one left).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import structlog
from pydantic import Field

from contracts.argv import render_token
from contracts.envelope import Strict
from services.bench.executor import SERVICE, ServerDied, ServerNotReady, ServingError, log_tail
from services.runtime.bundle_paths import validate_run_id
from services.runtime.errors import SpecdecError
from services.runtime.procs import EXPERIMENT_ENV, SERVICE_ENV
from services.trainer_proxy.monitor import run_short
from services.trainer_proxy.slurm import (
    ACTIVE_STATES,
    cancel_argv,
    cleanup_slurm,
    job_state,
    comment,
    job_name,
    parse_exit,
    parse_job_id,
    parse_record,
    status_argv,
)

if TYPE_CHECKING:
    from services.bench.plan import CellPlan, Launch
    from services.runtime.bundle import BundleStore

TEMPLATE = Path(__file__).resolve().parents[2] / "infra/slurm/serve.sbatch"
JOB_SCRIPT_FILE = "serve-job.py"
ENDPOINT_FILE = "endpoint.json"
LOG_FILE = "server.log"
POLL_S = 0.5
# How long a cancelled job may take to leave the queue before stop() gives up waiting.
STOP_WAIT_S = 30.0


class SlurmServe(Strict):
    """One server start as a Slurm batch job: everything that is submitted, verbatim."""

    job_name: str = Field(description="--job-name: specdec-<run_id>, half of the label cleanup selects by.")
    comment: str = Field(description="--comment: experiment=<run_id>, the other half of the label.")
    node: str = Field(description="--nodelist: the node the plan serves the cell on.")
    job_script: str = Field(description="The batch script (Python that fills the port and execs the argv; no shell).")
    job_script_path: str = Field(description="Bundle path the script is written to before submission.")
    sbatch_argv: list[str] = Field(description="The exact sbatch argv (its last item is the endpoint file's path).")
    log_path: str = Field(description="Bundle path of the server's stdout and stderr (--output and --error).")
    endpoint_path: str = Field(description="Bundle path of the endpoint file the job writes: host, port, argv, job ID.")
    status_argv: list[str] = Field(description="How the job is watched; {job_id} is sbatch's answer.")
    cancel_argv: list[str] = Field(description="How the job is stopped after its results are captured.")


# --- rendering (pure) -------------------------------------------------------------


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
    up front; the job is cancelled after its cell, and the partition's limit applies."""
    argv = [
        "sbatch", "--parsable",
        "--job-name", job_name(run_id),
        "--comment", comment(run_id),
        "--nodelist", node,
        "--nodes", "1",
        "--ntasks", "1",
        "--no-requeue",
        "--chdir", cwd,
        "--output", log,
        "--error", log,
    ]
    if selectors.get("partition"):
        argv += ["--partition", selectors["partition"]]
    if selectors.get("gres"):
        # Accelerators the server needs, e.g. gpu:1 (capacity.selectors.gres).
        argv += ["--gres", selectors["gres"]]
    return [*argv, script, endpoint]


def render_launch(
    argv: list[str], *, run_id: str, node: str, selectors: dict[str, str], run_dir: str, cwd: str, folder: str
) -> SlurmServe:
    """The Slurm block of one launch; `folder` is the launch's bundle folder."""
    script_rel, log_rel, endpoint_rel = (f"{folder}/{name}" for name in (JOB_SCRIPT_FILE, LOG_FILE, ENDPOINT_FILE))
    return SlurmServe(
        job_name=job_name(run_id),
        comment=comment(run_id),
        node=node,
        job_script=job_script(argv, run_id=run_id),
        job_script_path=script_rel,
        sbatch_argv=sbatch_argv(
            run_id=run_id, node=node, selectors=selectors, cwd=cwd, log=f"{run_dir}/{log_rel}",
            script=f"{run_dir}/{script_rel}", endpoint=f"{run_dir}/{endpoint_rel}",
        ),
        log_path=log_rel,
        endpoint_path=endpoint_rel,
        status_argv=status_argv("{job_id}"),
        cancel_argv=cancel_argv("{job_id}"),
    )


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


# --- execution ----------------------------------------------------------------------


def _fill(argv: list[str], job_id: str) -> list[str]:
    return [token.replace("{job_id}", job_id) for token in argv]


async def _short(argv: list[str], **kwargs: Any) -> Any:
    try:
        return await asyncio.to_thread(run_short, argv, **kwargs)
    except SpecdecError as exc:
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
        return {"job_id": self.job_id, "sbatch_argv": self.launch.sbatch_argv, "job_script": self.launch.job_script_path}

    async def state(self) -> tuple[str, dict[str, str]]:
        """The job's state and record, read as the trainer-proxy reads its jobs (scontrol,
        then sacct once the controller forgot the job)."""
        try:
            state, record = await job_state(self.job_id)
        except SpecdecError as exc:
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
        started = time.monotonic()
        endpoint: dict[str, Any] | None = None
        async with httpx.AsyncClient(timeout=2.0) as client:
            while True:
                state, record = await self.state()
                if state not in ACTIVE_STATES:
                    raise self._ended(state, record, "ended before its server was ready")
                if endpoint is None:
                    endpoint = read_endpoint(self.run_dir / self.launch.endpoint_path)
                    if endpoint is not None:
                        self.base_url = f"http://{endpoint['host']}:{endpoint['port']}"
                if endpoint is not None:
                    try:
                        if (await client.get(f"{self.base_url}/health")).status_code == 200:
                            return time.monotonic() - started
                    except httpx.TransportError:
                        pass
                if time.monotonic() - started > timeout_s:
                    where = f"at {self.base_url}" if endpoint else "(no endpoint file yet)"
                    raise ServerNotReady(
                        f"slurm job {self.job_id} did not answer /health {where} within {timeout_s:.0f}s "
                        f"(state {state}, reason {record.get('Reason', 'unknown')}); sbatch argv: "
                        f"{self.launch.sbatch_argv}\nlog tail:\n{log_tail(self.run_dir / self.launch.log_path)}"
                    )
                await asyncio.sleep(poll_s)

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
            "serving job still active after scancel", state=state, scancel_exit=cancelled.returncode,
            scancel_stderr=cancelled.stderr.strip()[-500:])


class SlurmExecutor:
    """Serves each launch as the batch job its plan shows."""

    def __init__(self, run_id: str, bundle: BundleStore) -> None:
        self.run_id = run_id
        self.bundle = bundle
        self.run_dir = bundle.run_dir(run_id).absolute()

    def _env(self) -> dict[str, str]:
        return {**os.environ, EXPERIMENT_ENV: self.run_id, SERVICE_ENV: SERVICE}

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
        submitted = await _short(block.sbatch_argv, env=self._env())
        if submitted.returncode != 0:
            raise ServingError(
                f"sbatch exited {submitted.returncode}: {submitted.stderr.strip() or submitted.stdout.strip()}; "
                f"argv: {block.sbatch_argv}"
            )
        try:
            job_id = parse_job_id(submitted.stdout)
        except SpecdecError as exc:
            raise ServingError(str(exc)) from None
        return SlurmServed(block, job_id, self.run_dir)

    async def cleanup(self) -> list[str]:
        """scancel every job still queued or running under this run's name and comment."""
        try:
            return [f"scancel {job}" for job in await cleanup_slurm(self.run_id)]
        except SpecdecError as exc:
            raise ServingError(str(exc)) from None
