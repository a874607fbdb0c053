"""Idle cost: CPU of each specdec service instance while no event arrives, on a real Redis.

Every service of `services.runtime.apps` is started as in production
(`python -m services.runtime.main NAME`, its settings from the environment:
the defaults, on a stream prefix of its own), together. Once each has logged
`service started` and a few settling seconds have passed, the CPU time of each
process (user + system, /proc/<pid>/stat) is read at the start and the end of an
idle window of 60 s (10 s quick); a service's idle cost is that CPU time over
the window's wall time, in percent of one core.

Reference, same window: the CPU of the Redis server the services poll
(`INFO cpu`), which also serves whatever else uses it on a shared machine.
Goal: <= 0.5 % of a core per instance, the journal included.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
IDLE_S = {False: 60.0, True: 10.0}
SETTLE_S = 3.0
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
GOAL_PERCENT = 0.5
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class IdleBenchError(Exception):
    """The idle benchmark could not measure (a service did not start, died, ...)."""


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (fields 14 and 15 of /proc/<pid>/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        raise IdleBenchError(f"process {pid} is gone") from None
    # The command name (field 2) may hold spaces; the fields after it are plain.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def redis_cpu_s(client: Any) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


class Instance:
    """One service process, its log, and whether it said it started."""

    def __init__(self, name: str, redis_url: str, prefix: str, workdir: Path) -> None:
        self.name = name
        self.log_path = workdir / f"{name}.log"
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO_ROOT),
            "SPECDEC_REDIS_URL": redis_url,
            "SPECDEC_STREAM_PREFIX": prefix,
            "SPECDEC_INSTANCE": f"idle-{name}",
            "SPECDEC_BUNDLE_ROOT": str(workdir / "bundles"),
            "SPECDEC_HEALTH_PORT": "0",
        }
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "services.runtime.main", name],
            cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=self._log,
        )

    def started(self) -> bool:
        if self.proc.poll() is not None:
            raise IdleBenchError(f"{self.name} exited {self.proc.returncode}; {self.log_tail()}")
        return b'"service started"' in self.log_path.read_bytes()

    def log_tail(self, n: int = 1500) -> str:
        return f"log ({self.log_path}) ends: {self.log_path.read_text(errors='replace')[-n:]!r}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def measure(names: list[str], redis_url: str, prefix: str, workdir: Path, *, idle_s: float) -> dict[str, Any]:
    """Idle CPU percent of each service and of Redis over one shared window."""
    import redis

    client = redis.Redis.from_url(redis_url)
    instances = [Instance(name, redis_url, prefix, workdir) for name in names]
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all(instance.started() for instance in instances):
            if time.monotonic() > deadline:
                late = [i.name for i in instances if not i.started()]
                raise IdleBenchError(f"not started after {START_TIMEOUT_S:g} s: {', '.join(late)}")
            time.sleep(0.2)
        time.sleep(SETTLE_S)
        before = {i.name: cpu_s(i.proc.pid) for i in instances}
        redis_before, wall_before = redis_cpu_s(client), time.monotonic()
        time.sleep(idle_s)
        after = {i.name: cpu_s(i.proc.pid) for i in instances}
        redis_after, wall_after = redis_cpu_s(client), time.monotonic()
    finally:
        for instance in instances:
            instance.stop()
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
        client.close()
    wall = wall_after - wall_before
    return {
        "window_s": wall,
        "services": {name: 100.0 * (after[name] - before[name]) / wall for name in names},
        "redis": 100.0 * (redis_after - redis_before) / wall,
    }


def bench(ctx: Any) -> list[dict[str, Any]]:
    from services.runtime import apps
    from services.runtime.main import resources_for
    from services.runtime.settings import RuntimeSettings
    from tests.perf.runner import make_row

    names = apps.available()
    prefix = f"perfidle{uuid.uuid4().hex[:8]}"
    measured = measure(names, ctx.redis_url, prefix, ctx.workdir, idle_s=IDLE_S[ctx.quick])
    settings = RuntimeSettings(redis_url=ctx.redis_url, bundle_root=ctx.workdir / "bundles")
    resources = resources_for(settings)
    setup = {
        "window_s": round(measured["window_s"], 1),
        "read_block_ms": settings.read_block_ms,
        "reclaim_poll_ms": settings.reclaim_poll_ms,
        "streams": {name: len(apps.load(name).routes(resources)) for name in names},
    }
    rows = []
    for name, percent in measured["services"].items():
        rows.append(make_row(
            f"idle.{name}", percent, "% of a core", goal=f"<= {GOAL_PERCENT:g} %", passed=percent <= GOAL_PERCENT,
            reference="redis-server CPU, same window", reference_value=measured["redis"],
        ) | {"setup": setup})
    return rows
