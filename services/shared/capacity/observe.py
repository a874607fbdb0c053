"""What an adapter hands back, and how it records each raw output it reads."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from services.shared.capacity.errors import SchedulerFailed
from services.shared.capacity.model import Capture, NodeView
from services.shared.scheduler.runner import CommandRunner, RunResult

# Scheduler reads that take longer than this are stuck; the step fails with the reason.
SCHEDULER_TIMEOUT_S = 30.0
_TAIL_CHARS = 2000
_UNSAFE_RE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass
class Observation:
    """The nodes an adapter saw and every raw output it read to see them."""

    nodes: list[NodeView] = field(default_factory=list)
    captures: list[Capture] = field(default_factory=list)


def capture_name(text: str) -> str:
    """A capture name (a bundle path component) from free text such as a node name."""
    name = _UNSAFE_RE.sub("_", text).lstrip("._-") or "unnamed"
    return name[:100]


def tail(text: str) -> str:
    return text if len(text) <= _TAIL_CHARS else "..." + text[-_TAIL_CHARS:]


def to_capture(name: str, result: RunResult) -> Capture:
    return Capture(
        name=capture_name(name),
        source=" ".join(result.argv),
        argv=list(result.argv),
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        duration_s=result.duration_s,
        stdout=result.stdout,
        stderr=result.stderr,
    )


def file_capture(name: str, path: str, text: str) -> Capture:
    return Capture(name=capture_name(name), source=path, argv=None, exit_code=None, duration_s=0.0, stdout=text)


def read_command(
    observation: Observation,
    runner: CommandRunner,
    name: str,
    argv: Sequence[str],
    *,
    timeout_s: float = SCHEDULER_TIMEOUT_S,
) -> str:
    """Run one scheduler read, record it, and return its stdout; SchedulerFailed unless it exited 0."""
    result = runner(argv, timeout_s=timeout_s)
    observation.captures.append(to_capture(name, result))
    if result.timed_out:
        raise SchedulerFailed(
            f"`{' '.join(result.argv)}` ran past its {timeout_s:g} s timeout; check that the scheduler answers"
        )
    if result.exit_code != 0:
        raise SchedulerFailed(
            f"`{' '.join(result.argv)}` exited {result.exit_code}: {tail(result.stderr.strip()) or '(no stderr)'}; "
            "check that the scheduler answers from this host and that its configuration is set "
            "(SLURM_CONF, KUBECONFIG)"
        )
    return result.stdout
