"""`specdec up`: every registered service as a local process, stopped together.

The compose topology without Docker, against the configured Redis. Stopping ends the services, then
every process still labelled with a run they were running, so a helper that ignored SIGTERM does not
outlive them (docs/delivery.md#stopping-and-restarting); each child also dies with this process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import TextIO

from services.runtime import apps
from services.runtime.processes import cpus, procs
from services.runtime.processes.procs import _die_with_parent
from services.runtime.settings import RuntimeSettings


def service_env() -> dict[str, str]:
    """The services' environment: this one without the operator's Redis URL, with this
    interpreter's bin folder first on PATH, so operator argv such as `python train.py` run
    in the same environment as specdec (the virtualenv under `make demo`)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    # The operator's Redis user alone may approve; a service never holds it (docs/deployment.md).
    env.pop(OPERATOR_URL_ENV, None)
    return env


OPERATOR_URL_ENV = "SPECDEC_OPERATOR_REDIS_URL"


def start(names: list[str], *, log_dir: str | None = None) -> dict[str, subprocess.Popen[bytes]]:
    children = {}
    env = service_env()
    for name in names:
        log = open(os.path.join(log_dir, f"{name}.log"), "ab") if log_dir else None  # handed to the child
        children[name] = subprocess.Popen(  # fixed argv
            [sys.executable, "-m", "services.runtime.main", name],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT if log else None,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        if log is not None:
            log.close()
        # specdec's services stay off the core vLLM's engine binds to (services/runtime/processes/cpus.py).
        cpus.pin(cpus.specdec_cpus(), children[name].pid)
    return children


def stop_grace_s(shutdown_grace_s: float) -> float:
    """How long a stopping service gets before SIGKILL: its in-flight work's grace period
    (SPECDEC_SHUTDOWN_GRACE_S), then the time to end its servers (SIGTERM, then SIGKILL after
    their own grace) and close."""
    return shutdown_grace_s + WORKLOAD_STOP_S


# A stopped step ends its servers' groups with SIGTERM and SIGKILL after 5 s (services/runtime/processes/procs.py);
# this leaves that and the service's own exit time.
WORKLOAD_STOP_S = 15.0
# What a labelled process gets between SIGTERM and SIGKILL when `up` ends it itself.
WORKLOAD_GRACE_S = 5.0


def stop(children: dict[str, subprocess.Popen[bytes]], grace_s: float) -> list[int]:
    """SIGTERM every service, SIGKILL those still running after `grace_s`; the labelled process
    groups of a service that had to be SIGKILLed are ended too (they were its children, found
    before the kill), since it could not end them itself. Then every process still labelled with a
    run (and deployment) the services' workloads carried when the stop began is ended, by that label.
    Returns the groups ended."""
    runs = {(proc.run_id, proc.deployment) for child in children.values() if child.poll() is None
            for proc in procs.labelled_descendants(child.pid)}
    for child in children.values():
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    ended: list[int] = []
    for child in children.values():
        remaining = max(0.0, deadline - time.monotonic())
        try:
            child.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            groups = procs.workload_groups(child.pid)
            child.kill()
            child.wait()
            for pgid in groups:
                procs.kill_group(pgid, grace_s=WORKLOAD_GRACE_S)
            ended += groups
    for run_id, deployment in sorted(runs, key=str):
        ended += [pgid for pgid in procs.end_labelled(run_id, deployment=deployment, grace_s=WORKLOAD_GRACE_S)
                  if pgid not in ended]
    return ended


def up(names: list[str] | None, out: TextIO, *, grace_s: float | None = None) -> int:
    selected = names or apps.available()
    unknown = [n for n in selected if n not in apps.APP_MODULES]
    if unknown:
        out.write(f"unknown or unbuilt services: {', '.join(unknown)}; available: {', '.join(apps.available())}\n")
        return 2
    if apps.missing() and not names:
        out.write(f"not built yet, not started: {', '.join(apps.missing())}\n")
    # Read before any service starts: a stop must never depend on reading the settings again.
    grace = stop_grace_s(RuntimeSettings().shutdown_grace_s) if grace_s is None else grace_s
    children = start(selected)
    out.write(f"started {', '.join(f'{n} (pid {c.pid})' for n, c in children.items())}; Ctrl-C stops them\n")
    out.flush()
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    exit_code = 0
    try:
        while not stopping:
            for name, child in children.items():
                if child.poll() is not None:
                    out.write(f"service {name} exited with {child.returncode}; stopping the others\n")
                    exit_code = 1
                    stopping = True
            time.sleep(0.2)
    finally:
        stop(children, grace)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    out.write("all services stopped\n")
    return exit_code
