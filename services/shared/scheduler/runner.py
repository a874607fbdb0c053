"""Running a short command: an argv list (never a shell), stdin closed, a timeout.

Adapters take a `CommandRunner`, so the same code runs against the real
`sinfo`/`squeue`/`kubectl`/idle check and, in unit tests, against recorded
outputs. `run_short` is the form the executors use for a scheduler command
that must answer (sbatch, scontrol, sacct, squeue, scancel, kubectl).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from services.shared.scheduler.errors import CommandMissing, CommandTimedOut

# After a timeout the killed process group gets this long to close its pipes.
_DRAIN_S = 5.0
# A scheduler command that takes longer is stuck.
SHORT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class RunResult:
    """What one command did. exit_code is None when it was killed at its timeout."""

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class CommandRunner(Protocol):
    """argv -> RunResult. Raises CommandMissing when argv[0] cannot be executed. `env`, when given, is
    the child's whole environment (the idle check's: a workload's, services/runtime/processes/workload_env.py)."""

    def __call__(self, argv: Sequence[str], *, timeout_s: float, env: Mapping[str, str] | None = None) -> RunResult: ...


class SubprocessRunner:
    """Runs argv as a child process in its own session, no shell, stdin closed.

    On timeout the whole process group is killed (an idle check that forks a
    helper must not leave it behind) and the result says `timed_out`.
    """

    def __init__(self, env: Mapping[str, str] | None = None, *, inherit: bool = True) -> None:
        # Extra variables on top of this process's environment (e.g. SLURM_CONF); with inherit False,
        # the child's whole environment (a workload's: services/runtime/processes/workload_env.py).
        self.env = dict(env or {})
        self.inherit = inherit

    def __call__(self, argv: Sequence[str], *, timeout_s: float, env: Mapping[str, str] | None = None) -> RunResult:
        """Run argv; `env`, when given, is the child's environment (a workload's) and the runner's additions
        go on top of it; else this process's environment with the runner's additions."""
        args = [str(a) for a in argv]
        if env is not None:
            env = {**env, **self.env}
        else:
            env = {**os.environ, **self.env} if self.inherit else dict(self.env)
        started = time.monotonic()
        try:
            proc = subprocess.Popen(  # an argv list, never a shell
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise CommandMissing(
                f"{args[0]!r} is not installed or not on PATH ({exc.strerror}); install it or give its full path"
            ) from exc
        except PermissionError as exc:
            raise CommandMissing(f"{args[0]!r} is not executable ({exc.strerror}); fix its permissions") from exc
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                out, err = proc.communicate(timeout=_DRAIN_S)
            except subprocess.TimeoutExpired:
                # A grandchild that left the group still holds the pipes: give up on them.
                proc.kill()
                out, err = b"", b""
                proc.wait()
        return RunResult(
            argv=tuple(args),
            exit_code=None if timed_out else proc.returncode,
            stdout=out.decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
            duration_s=round(time.monotonic() - started, 6),
            timed_out=timed_out,
        )


def run_short(argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout_s: float = SHORT_TIMEOUT_S,
              inherit: bool = True) -> RunResult:
    """A short scheduler command that must answer: CommandTimedOut past `timeout_s`,
    CommandMissing when it is not installed. `env` adds to this process's environment, or with
    `inherit` False is the whole environment (sbatch passes it on to the job it submits)."""
    result = SubprocessRunner(env, inherit=inherit)(argv, timeout_s=timeout_s)
    if result.timed_out:
        raise CommandTimedOut(f"{list(argv)!r} did not answer within {timeout_s:g} s; is the scheduler up?")
    return result
