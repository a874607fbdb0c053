"""`specdec up`: every registered service as a local process, stopped together.

The compose topology without Docker: one process per service (each its own
consumer group member) against the configured Redis. Ctrl-C or SIGTERM stops
them all (SIGTERM, then SIGKILL after the grace period); each child also dies
with this process (parent-death signal).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import TextIO

from services.runtime import apps, cpus
from services.runtime.procs import _die_with_parent


def service_env() -> dict[str, str]:
    """The services' environment: this one, with this interpreter's bin folder
    first on PATH, so operator argv such as `python train.py` run in the same
    environment as specdec (the virtualenv under `make demo`)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    return env


def start(names: list[str], *, log_dir: str | None = None) -> dict[str, subprocess.Popen[bytes]]:
    children = {}
    env = service_env()
    for name in names:
        log = open(os.path.join(log_dir, f"{name}.log"), "ab") if log_dir else None  # noqa: SIM115 - handed to the child
        children[name] = subprocess.Popen(  # noqa: S603 - fixed argv
            [sys.executable, "-m", "services.runtime.main", name],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT if log else None,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        if log is not None:
            log.close()
        # specdec's services stay off the core vLLM's engine binds to (services/runtime/cpus.py).
        cpus.pin(cpus.specdec_cpus(), children[name].pid)
    return children


def stop(children: dict[str, subprocess.Popen[bytes]], grace_s: float) -> None:
    for child in children.values():
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for child in children.values():
        remaining = max(0.0, deadline - time.monotonic())
        try:
            child.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def up(names: list[str] | None, out: TextIO, *, grace_s: float = 15.0) -> int:
    selected = names or apps.available()
    unknown = [n for n in selected if n not in apps.APP_MODULES]
    if unknown:
        out.write(f"unknown or unbuilt services: {', '.join(unknown)}; available: {', '.join(apps.available())}\n")
        return 2
    if apps.missing() and not names:
        out.write(f"not built yet, not started: {', '.join(apps.missing())}\n")
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
        stop(children, grace_s)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    out.write("all services stopped\n")
    return exit_code
