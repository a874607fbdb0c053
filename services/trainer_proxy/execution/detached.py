"""The local trainer, detached from its service: started under a keeper, watched, re-attached to.

The trainer outlives a service that dies, and a restarted one watches it the same way as the first
(loss scan from the files' first byte, timeout from the recorded start). Its label is `trainer`, not
the trainer-proxy's, so a restarted service's reconcile never ends a trainer it can re-attach to. No
exit record and no live keeper: captured as interrupted (docs/trainer-proxy.md#redelivery).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts import layout
from services.runtime.processes import workload_env
from services.runtime.processes.procs import EXPERIMENT_ENV, kill_group, spawn
from services.shared.secret_args import mask_argv
from services.trainer_proxy.errors import ExecutorError
from services.trainer_proxy.execution import keeper as keeper_script
from services.trainer_proxy.execution.monitor import OutputWatch, RunOutcome
from services.trainer_proxy.execution.progress import Reporter
from services.trainer_proxy.planning.model import DETACHED_SERVICE, LocalLaunch

# Bundle paths the keeper writes, each whole (a temporary file, then rename).
KEEPER_RECORD = layout.TRAINING_KEEPER
EXIT_RECORD = layout.TRAINING_EXIT
POLL_S = 0.1
# How long past its own grace a keeper told to stop may take to record the end, before SIGKILL.
KEEPER_SLACK_S = 2.0


@dataclass(frozen=True)
class Kept:
    """What the keeper recorded once the trainer ran."""

    keeper_pid: int
    keeper_start: int | None
    trainer_pid: int
    trainer_start: int | None
    started_at: float


def _read(path: Path) -> dict[str, Any] | None:  # a keeper record, as json.loads read it
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None  # written whole by rename: unreadable means not ours, treated as absent
    return data if isinstance(data, dict) else None


def _kept(run_dir: Path) -> Kept | None:
    data = _read(run_dir / KEEPER_RECORD)
    if data is None:
        return None
    return Kept(keeper_pid=int(data["keeper_pid"]), keeper_start=data.get("keeper_start"),
                trainer_pid=int(data["trainer_pid"]), trainer_start=data.get("trainer_start"),
                started_at=float(data["started_at"]))


def same_process(pid: int, start: int | None) -> bool:
    """`pid` runs (not a zombie) and started when recorded: not another process that reused the pid."""
    if start is None:
        return False
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] != "Z" and int(fields[19]) == start


def _carries(pid: int, run_id: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"{EXPERIMENT_ENV}={run_id}".encode() in environ


async def run_detached(
    launch: LocalLaunch, *, run_id: str, run_dir: Path, timeout_s: float, kill_grace_s: float,
    on_started: Callable[[str], Awaitable[None]], progress: Reporter | None = None,
) -> RunOutcome:
    """Start the trainer under its keeper and watch it to its end (see the module's docstring)."""
    env = workload_env.environment(launch.env, where="commands.train.env")
    (run_dir / KEEPER_RECORD).parent.mkdir(parents=True, exist_ok=True)
    for relpath in (launch.stdout_path, launch.stderr_path):
        (run_dir / relpath).parent.mkdir(parents=True, exist_ok=True)
    spec = {
        # The keeper runs in the run folder: the trainer's folder is resolved here, against the service's.
        "argv": launch.argv, "cwd": str(Path(launch.cwd).absolute()), "grace_s": kill_grace_s,
        "stdout": str(run_dir / launch.stdout_path), "stderr": str(run_dir / launch.stderr_path),
        "record": str(run_dir / KEEPER_RECORD), "exit": str(run_dir / EXIT_RECORD),
    }
    cannot = (f"cannot start {mask_argv(launch.argv)!r} in {launch.cwd}: {{}}; fix commands.train (argv[0] must be "
              "an executable on the node's PATH or a path relative to the service's working directory)")
    if not Path(launch.cwd).is_dir():
        raise ExecutorError(cannot.format(f"no such directory: {launch.cwd!r}"))
    # -I: the keeper is standard library only; the service's PYTHON* variables are the trainer's.
    keeper = spawn([sys.executable, "-I", keeper_script.__file__, json.dumps(spec)], run_id=run_id,
                   service=DETACHED_SERVICE, env=env, cwd=run_dir, stdout=subprocess.PIPE, detached=True)
    assert keeper.stdout is not None
    line = await asyncio.to_thread(keeper.stdout.readline)
    keeper.stdout.close()
    answer = json.loads(line) if line.strip() else {"error": "its keeper exited before starting it"}
    if "error" in answer:
        await asyncio.to_thread(keeper.wait)
        raise ExecutorError(cannot.format(answer["error"]))
    kept = _kept(run_dir)
    assert kept is not None, "the keeper records the trainer before it answers"

    def alive() -> bool:
        return keeper.poll() is None

    try:
        await on_started(str(kept.trainer_pid))
        outcome = await _watch(launch, run_dir, kept, alive, timeout_s=timeout_s, kill_grace_s=kill_grace_s,
                               progress=progress)
    except BaseException:
        # The step is failing or being cancelled (the service stops): the trainer stops with it,
        # its end recorded as stopped. A redelivery captures what it left as interrupted.
        await asyncio.to_thread(_stop_keeper, kept, alive, kill_grace_s)
        raise
    await asyncio.to_thread(keeper.wait)
    return outcome if outcome is not None else _lost(launch, kept)


async def reattach(
    launch: LocalLaunch, *, run_id: str, run_dir: Path, timeout_s: float, kill_grace_s: float,
    progress: Reporter | None = None,
) -> RunOutcome | None:
    """A restarted service's watch over the trainer an earlier delivery started: its recorded end, or
    the live trainer watched to its end; None when there is neither (never started, or killed with
    its keeper)."""
    kept = _kept(run_dir)
    if kept is None:
        return None
    if (run_dir / EXIT_RECORD).exists():
        return await _watch(launch, run_dir, kept, lambda: False, timeout_s=timeout_s, kill_grace_s=kill_grace_s,
                            progress=progress)
    if not (same_process(kept.keeper_pid, kept.keeper_start) and _carries(kept.keeper_pid, run_id)):
        return None

    def alive() -> bool:
        return same_process(kept.keeper_pid, kept.keeper_start)

    try:
        return await _watch(launch, run_dir, kept, alive, timeout_s=timeout_s, kill_grace_s=kill_grace_s,
                            progress=progress)
    except BaseException:
        await asyncio.to_thread(_stop_keeper, kept, alive, kill_grace_s)
        raise


async def _watch(
    launch: LocalLaunch, run_dir: Path, kept: Kept, alive: Callable[[], bool], *, timeout_s: float,
    kill_grace_s: float, progress: Reporter | None = None,
) -> RunOutcome | None:
    """Until the exit record: the loss scan and the timeout (each ends the trainer's group once), and the
    progress relayed as the trainer prints it."""
    watch = OutputWatch({"stdout": run_dir / launch.stdout_path, "stderr": run_dir / launch.stderr_path},
                        progress=progress.scanner if progress is not None else None)
    if progress is not None:
        progress.start(kept.started_at)
    exit_path = run_dir / EXIT_RECORD
    timed_out = stopped_for_loss = False
    while not exit_path.exists():
        if not alive():
            if exit_path.exists():  # recorded just before the keeper exited
                break
            return None
        if not (timed_out or stopped_for_loss):
            if watch.poll() is not None:
                stopped_for_loss = True
            elif time.time() - kept.started_at > timeout_s:
                timed_out = True
            if (timed_out or stopped_for_loss) and same_process(kept.trainer_pid, kept.trainer_start):
                await asyncio.to_thread(kill_group, kept.trainer_pid, grace_s=kill_grace_s)
        if progress is not None:
            await progress.tick()
        await asyncio.sleep(POLL_S)
    ended = _read(exit_path) or {}
    losses = watch.finish()
    if progress is not None:
        await progress.tick(final=True)
    duration = max(0.0, float(ended.get("ended_at", kept.started_at)) - kept.started_at)
    return RunOutcome(
        handle=str(kept.trainer_pid),
        launched_argv=list(launch.argv),
        exit_code=ended.get("exit_code"),
        signal=ended.get("signal"),
        duration_s=round(duration, 3),
        # A restarted service did not see its predecessor end the trainer at the timeout: the
        # recorded run time tells (the loss scan tells of a non-finite loss by itself).
        timed_out=timed_out or (duration > timeout_s and ended.get("exit_code") != 0),
        stopped_for_loss=stopped_for_loss,
        interrupted=bool(ended.get("stopped")),
        losses=losses,
    )


def _lost(launch: LocalLaunch, kept: Kept) -> RunOutcome:
    return RunOutcome(handle=str(kept.trainer_pid), launched_argv=list(launch.argv), exit_code=None, signal=None,
                      duration_s=round(max(0.0, time.time() - kept.started_at), 3), interrupted=True)


def _stop_keeper(kept: Kept, alive: Callable[[], bool], grace_s: float) -> None:
    """SIGTERM the keeper (it ends the trainer's group and records the stop); SIGKILL it (the trainer
    dies with it) when it has not exited after the trainer's grace and a little more."""
    if not alive():
        return
    try:
        os.kill(kept.keeper_pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s + KEEPER_SLACK_S
    while time.monotonic() < deadline and alive():
        time.sleep(0.05)
    if alive():
        try:
            os.kill(kept.keeper_pid, signal.SIGKILL)
        except ProcessLookupError:
            return
