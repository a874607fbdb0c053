"""Child processes that carry an experiment label and die with their service.

Every child a service starts runs in its own process group, carries
SPECDEC_EXPERIMENT=<run-id> and SPECDEC_SERVICE=<service> in its environment
(the label), and gets SIGKILL when its parent dies (PR_SET_PDEATHSIG), unless
started detached (a local trainer's keeper, which records its trainer's end for a
restarted service). Cleanup selects by that label only; a stopping service ends
every labelled process of the runs it started children for (`end_started`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from services.runtime.processes import cpus

EXPERIMENT_ENV = "SPECDEC_EXPERIMENT"
SERVICE_ENV = "SPECDEC_SERVICE"
# Which deployment (Redis and stream prefix) started the process: two specdec deployments
# on one host have separate ledgers, so a restarted service may clean only its own work.
DEPLOYMENT_ENV = "SPECDEC_DEPLOYMENT"


def deployment_id(redis_url: str, stream_prefix: str) -> str:
    """`<prefix>@<host>:<port>/<db>`: the ledger a service records in (never the URL's credentials)."""
    url = urlsplit(redis_url)
    db = url.path.lstrip("/") or "0"
    return f"{stream_prefix}@{url.hostname or ''}:{url.port or 6379}/{db}"


def label_deployment(deployment: str) -> None:
    """Mark this process, and every child it starts from now on, as work of `deployment`.

    The label lives in the environment so that grandchildren (a window process's
    children, a trainer's workers) inherit it like the experiment label."""
    os.environ[DEPLOYMENT_ENV] = deployment
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Runs in the child between fork and exec. If the parent is already gone
    # (re-parented to init), exit at once rather than run unowned.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _workload_child() -> None:
    # A workload (vLLM server, trainer, operator command) gets the whole machine back,
    # even when its service runs pinned off the engine's core (services/runtime/processes/cpus.py).
    _die_with_parent()
    cpus.pin(cpus.machine_cpus())


def _detached_child() -> None:
    # A workload that outlives its service on purpose (a local trainer's keeper:
    # services/trainer_proxy/execution/keeper.py): no parent-death signal.
    cpus.pin(cpus.machine_cpus())


def spawn(
    argv: Sequence[str],
    *,
    run_id: str,
    service: str,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    stdout: int | IO[Any] | None = subprocess.DEVNULL,
    stderr: int | IO[Any] | None = subprocess.DEVNULL,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    detached: bool = False,
) -> subprocess.Popen[bytes]:
    """Start argv (no shell) in its own process group with the experiment label. `env` is the child's
    whole environment: a workload's comes from services/runtime/processes/workload_env.py; None (this process's)
    is for specdec's own tools only (a `kubectl port-forward`). A `detached` child does not die with
    this process: it must record its own end where a restarted service finds it."""
    child_env = dict(os.environ if env is None else env)
    _started.add((run_id, service))
    child_env[EXPERIMENT_ENV] = run_id
    child_env[SERVICE_ENV] = service
    deployment = os.environ.get(DEPLOYMENT_ENV)
    if deployment is not None:
        child_env[DEPLOYMENT_ENV] = deployment
    return subprocess.Popen(  # argv list, never a shell
        list(argv),
        env=child_env,
        cwd=cwd,
        stdout=stdout,
        stderr=stderr,
        stdin=stdin,
        # Its own process group (killed as a group, out of reach of a terminal's
        # Ctrl-C), but not a session of its own: with the kernel's autogroup
        # scheduling every session is one CPU group, and a vLLM server in a group
        # of its own, whose engine keeps a core busy, starved its API server:
        # whole windows arrived in one burst (docs/bench-runner.md).
        process_group=0,
        preexec_fn=_detached_child if detached else _workload_child,
    )


# The (run, service) labels this process has started children under: what it ends when it stops.
_started: set[tuple[str, str]] = set()


def end_started(*, grace_s: float = 5.0) -> dict[int, list[int]]:
    """End every process group labelled with a run and service this process started children under
    (and this process's deployment, when it has one), SIGTERM, then SIGKILL after `grace_s`: a
    stopping service's last act. Selected by the label, so a child's own helper that its parent's
    end re-parented (multiprocessing's resource tracker, which ignores SIGTERM) is ended too."""
    deployment = os.environ.get(DEPLOYMENT_ENV)
    ended: dict[int, list[int]] = {}
    for run_id, service in sorted(_started):
        ended.update(end_labelled(run_id, service=service, deployment=deployment, grace_s=grace_s))
    return ended


def kill_group(pgid: int, *, grace_s: float = 5.0) -> None:
    """SIGTERM a process group, then SIGKILL what is left after the grace period."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not _group_alive(pgid):
            return
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    # SIGKILL is delivered at once, but a process leaves /proc only once the kernel has torn it
    # down: a caller that looks for labelled work right after (the pre-launch idle check) must not
    # find the group it just ended. Bounded: a process stuck in the kernel (D state) is left.
    deadline = time.monotonic() + KILL_SETTLE_S
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.05)


# How long kill_group waits for a SIGKILLed group to be gone from /proc.
KILL_SETTLE_S = 5.0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    # Zombies still count for killpg; look at their state.
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def end_labelled(run_id: str, *, service: str | None = None, deployment: str | None = None,
                 grace_s: float = 5.0) -> dict[int, list[int]]:
    """End the process groups of processes labelled with `run_id` (and `service`, `deployment` when
    given), SIGTERM, then SIGKILL after `grace_s`; never the caller's own group. The groups ended,
    in the order found, each with the labelled pids seen in it."""
    groups: dict[int, list[int]] = {}
    for proc in labelled_processes(service, deployment=deployment):
        if proc.run_id == run_id and proc.pgid != os.getpgrp():
            groups.setdefault(proc.pgid, []).append(proc.pid)
    for pgid in groups:
        kill_group(pgid, grace_s=grace_s)
    return groups


def workload_groups(pid: int) -> list[int]:
    """The process groups of `pid`'s labelled descendants (the workloads a service started), read
    from /proc while `pid` lives; never `pid`'s own group."""
    groups: list[int] = []
    for proc in labelled_descendants(pid):
        if proc.pgid not in groups:
            groups.append(proc.pgid)
    return groups


def labelled_descendants(pid: int) -> list[Labelled]:
    """`pid`'s labelled descendants outside its own process group, read from /proc while `pid` lives."""
    parents: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(proc.name)] = int(fields[1])

    def descends(child: int) -> bool:
        seen = set()
        while child in parents and child not in seen:
            seen.add(child)
            child = parents[child]
            if child == pid:
                return True
        return False

    own = _pgid(pid)
    return [proc for proc in labelled_processes() if proc.pgid != own and descends(proc.pid)]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


@dataclass(frozen=True)
class Labelled:
    """A process carrying the experiment label."""

    pid: int
    pgid: int
    run_id: str
    service: str
    deployment: str | None  # None: started outside any labelled deployment


def labelled_processes(service: str | None = None, *, deployment: str | None = None) -> list[Labelled]:
    """Processes on this machine whose environment carries the experiment label
    (of `service` and of `deployment` when given)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            pgid = os.getpgid(int(proc.name))
        except (OSError, ProcessLookupError):
            continue
        env = dict(item.split(b"=", 1) for item in environ if b"=" in item)
        run_id = env.get(EXPERIMENT_ENV.encode())
        owner = env.get(SERVICE_ENV.encode())
        if run_id is None or owner is None:
            continue
        if service is not None and owner.decode() != service:
            continue
        label = env.get(DEPLOYMENT_ENV.encode())
        their_deployment = None if label is None else label.decode()
        if deployment is not None and their_deployment != deployment:
            continue
        found.append(Labelled(pid=int(proc.name), pgid=pgid, run_id=run_id.decode(), service=owner.decode(),
                              deployment=their_deployment))
    return found
