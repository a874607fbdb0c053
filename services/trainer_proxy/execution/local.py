"""The local executor: labelled child processes of the service, exec'd from an argv list (never a shell).

Each child runs in its own process group with the workload's environment (services/runtime/processes/workload_env.py),
and its whole group is stopped at the timeout, the first non-finite loss and its main process's exit.
The trainer runs detached under a keeper (detached.py); every other child dies with the service.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from contracts.catalogue import TRAINER as SERVICE
from services.runtime.processes import workload_env
from services.runtime.processes.procs import kill_group, spawn
from services.shared.scheduler.local import kill_labelled
from services.shared.secret_args import mask_argv
from services.trainer_proxy.errors import ExecutorError
from services.trainer_proxy.execution.detached import run_detached
from services.trainer_proxy.execution.monitor import OutputWatch, RunOutcome
from services.trainer_proxy.execution.progress import Reporter
from services.trainer_proxy.planning.model import DETACHED_SERVICE, LocalLaunch

OnStarted = Callable[[str], Awaitable[None]]
POLL_S = 0.1


async def _no_op(_: str) -> None:
    return None


async def run_process(
    argv: Sequence[str],
    *,
    run_id: str,
    cwd: str,
    stdout_path: Path,
    stderr_path: Path,
    timeout_s: float,
    kill_grace_s: float,
    watch_loss: bool,
    on_started: OnStarted = _no_op,
    declared_env: Sequence[str] = (),
) -> RunOutcome:
    """Run argv to its end, the timeout or (when `watch_loss`) a non-finite loss, in the workload's
    environment: the platform's variables and the `declared_env` names (commands.train.env) only."""
    env = workload_env.environment(declared_env, where="commands.train.env")
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    stderr_path.parent.mkdir(parents=True, exist_ok=True)
    watch = OutputWatch({"stdout": stdout_path, "stderr": stderr_path})
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        started = time.monotonic()
        try:
            process = spawn(argv, run_id=run_id, service=SERVICE, env=env, cwd=cwd, stdout=out, stderr=err)
        except OSError as exc:
            raise ExecutorError(
                f"cannot start {mask_argv(argv)!r} in {cwd}: {exc}; fix commands.train (argv[0] must be an executable "
                "on the node's PATH or a path relative to the service's working directory)"
            ) from None
    timed_out = stopped_for_loss = False
    try:
        await on_started(str(process.pid))
        while process.poll() is None:
            if watch_loss and watch.poll() is not None:
                stopped_for_loss = True
                break
            if time.monotonic() - started > timeout_s:
                timed_out = True
                break
            await asyncio.sleep(POLL_S)
    except BaseException:
        # The step is failing or being cancelled (the service stops): the
        # trainer must not run on unowned. A redelivery captures what it left.
        kill_group(process.pid, grace_s=min(kill_grace_s, 2.0))
        process.wait()
        raise
    ended = time.monotonic()
    # The main process ended or must be stopped: stop its whole group. kill_group
    # returns at once when the group is already gone.
    await asyncio.to_thread(kill_group, process.pid, grace_s=kill_grace_s)
    code = await asyncio.to_thread(process.wait)
    losses = watch.finish() if watch_loss else []
    return RunOutcome(
        handle=str(process.pid),
        launched_argv=list(argv),
        exit_code=code if code >= 0 else None,
        signal=-code if code < 0 else None,
        duration_s=round(ended - started, 3),
        timed_out=timed_out,
        stopped_for_loss=stopped_for_loss,
        losses=losses,
    )


async def run_local(
    launch: LocalLaunch, *, run_id: str, run_dir: Path, timeout_s: float, kill_grace_s: float, on_started: OnStarted,
    progress: Reporter | None = None,
) -> RunOutcome:
    """The trainer, detached under its keeper, watched to its end (its progress relayed when declared)."""
    return await run_detached(launch, run_id=run_id, run_dir=run_dir, timeout_s=timeout_s,
                              kill_grace_s=kill_grace_s, on_started=on_started, progress=progress)


def cleanup_local(run_id: str, *, grace_s: float) -> list[int]:
    """Kill the process groups of processes still labelled with this run and this
    service, or with its detached trainer's label (selected by the label only); the groups killed."""
    return [*kill_labelled(run_id, SERVICE, grace_s=grace_s), *kill_labelled(run_id, DETACHED_SERVICE, grace_s=grace_s)]
