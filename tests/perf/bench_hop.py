"""Event hop latency and sustained events/s through one service instance, on a real Redis.

Two processes, so publisher and service never share an event loop:
- the service: `python -m tests.perf.bench_hop serve`, a real specdec service
  (`services.runtime.delivery.service.bootstrap`, default runtime settings, info logs)
  consuming `profile.requested` with a handler that only notes the time it was
  entered and returns no events. For every message it writes one line to
  stdout: `h <event_id> <handler entry ns> <handle done ns>`, "done" being after
  the whole consumer path (parse, ledger done-check, lease, finish, ack).
- the publisher (this process, in `bench`): publishes with `Bus.publish`.

Times come from `time.monotonic_ns()` (CLOCK_MONOTONIC): one clock for every
process of the machine, so timestamps of the two processes subtract.

(a) hop latency publish -> handler entry, one event at a time (the next goes
    once the previous one is fully handled: each hop meets an idle service);
(b) throughput: N events published as fast as the publisher can, from the first
    publish to the end of the handling of the last;
(c) drain: the service stopped (SIGSTOP), N events published as a backlog, the
    service continued (SIGCONT) and timed from then to the end of the handling of
    the last: the instance's own rate, with no publisher beside it on the machine's
    cores (on 2 cores, b's publisher takes CPU the service would use);
(d) the reference, same run: `redis-benchmark` XADD with 50 clients (requests/s,
    for b and c) and with 1 client (round-trip p50/p99, for a).
Goals: hop p50 <= 1 ms, p99 <= 5 ms, >= 2,000 events/s per instance.
HOP_PROFILE=<path> runs the service under cProfile (stats dumped there); see docs/perf.md.
"""

from __future__ import annotations

import asyncio
import csv
import io
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_ID = "perf-hop-run"
SCHEMA = "profile.requested"
SERVICE = "perf-hop"

LATENCY_EVENTS = {False: 2000, True: 200}
THROUGHPUT_EVENTS = {False: 20_000, True: 2000}
WARMUP_EVENTS = 50
PUBLISH_CONCURRENCY = 50  # publishes in flight at once in the throughput phase
XADD_REQUESTS = {False: 100_000, True: 20_000}
XADD_RTT_REQUESTS = {False: 10_000, True: 2000}
P50_GOAL_MS = 1.0
P99_GOAL_MS = 5.0
RATE_GOAL = 2000.0
START_TIMEOUT_S = 60.0
# The service's report lines are flushed to the pipe at most this often: a
# write (and a wake-up of this process) per event would be the benchmark's own
# cost on the CPU it measures. The times in the lines are taken before.
REPORT_FLUSH_S = 0.001
HOP_TIMEOUT_S = 10.0


class HopBenchError(Exception):
    """The hop benchmark could not measure (service died, events lost, ...)."""


class HopTimeout(HopBenchError):
    """The service wrote nothing within the time allowed."""


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (an observed value): the smallest v with >= q% of values <= v."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


# --- the service process ------------------------------------------------------


async def _serve() -> None:
    import signal

    from services.runtime.delivery.route import Route
    from services.runtime.delivery.service import bootstrap
    from services.runtime.health import logs
    from services.runtime.settings import RuntimeSettings

    settings = RuntimeSettings()
    logs.configure(SERVICE, settings.log_level)
    out = sys.stdout.buffer
    # Keyed by the handling task: the handler runs inside consumer.handle's task.
    entries: dict[int, tuple[str, int]] = {}

    async def on_event(event: Any, ctx: Any) -> list[Any]:
        entered = time.monotonic_ns()
        task = asyncio.current_task()
        entries[id(task)] = (event.event_id, entered)
        return []

    # Every event is its own step, so none is skipped as a duplicate.
    route = Route(SCHEMA, on_event, step_key=lambda event: event.event_id)
    service = bootstrap(SERVICE, [route], settings=settings)
    handle = service.consumer.handle

    loop = asyncio.get_running_loop()
    flush: list[asyncio.TimerHandle] = []

    def flush_out() -> None:
        flush.clear()
        out.flush()

    async def timed_handle(route: Route, delivery: Any, **options: Any) -> None:
        # The subscribers look `consumer.handle` up per message, so this wraps
        # the whole consumer path without touching the runtime. Inside a read batch
        # an entry's done mark is written with the next entry's lease (`defer_finish`):
        # the last event of a run is never deferred, so the rate still ends at a
        # done mark.
        await handle(route, delivery, **options)
        done = time.monotonic_ns()
        entry = entries.pop(id(asyncio.current_task()), None)
        if entry is not None:
            out.write(f"h {entry[0]} {entry[1]} {done}\n".encode())
            if not flush:
                flush.append(loop.call_later(REPORT_FLUSH_S, flush_out))

    service.consumer.handle = timed_handle  # type: ignore[method-assign]  # timed, for the bench

    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await service.start()
    out.write(b"ready\n")
    out.flush()
    await stop.wait()
    await service.stop()


def serve_main() -> None:
    profile_path = os.environ.get("HOP_PROFILE")
    if not profile_path:
        asyncio.run(_serve())
        return
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        asyncio.run(_serve())
    finally:
        profiler.disable()
        profiler.dump_stats(profile_path)


# --- the publisher (this process) ---------------------------------------------


class ServiceProcess:
    """The service child: started, awaited ready, read line by line, stopped."""

    def __init__(self, redis_url: str, prefix: str, workdir: Path) -> None:
        self.redis_url = redis_url
        self.prefix = prefix
        self.workdir = workdir
        self.log_path = workdir / "service.log"
        self.proc: asyncio.subprocess.Process | None = None
        self._log: Any = None

    async def start(self) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO_ROOT),
            "SPECDEC_REDIS_URL": self.redis_url,
            "SPECDEC_STREAM_PREFIX": self.prefix,
            "SPECDEC_INSTANCE": f"{SERVICE}-1",
            "SPECDEC_BUNDLE_ROOT": str(self.workdir / "bundles"),
        }
        self._log = self.log_path.open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.perf.bench_hop", "serve",
            cwd=REPO_ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=self._log,
            limit=1 << 20,
        )
        line = await self.readline(START_TIMEOUT_S, "the service to start")
        if line != "ready":
            raise HopBenchError(f"service said {line!r} instead of ready; {self.log_tail()}")

    async def readline(self, timeout_s: float, what: str) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout_s)
        except TimeoutError:
            raise HopTimeout(f"timed out after {timeout_s}s waiting for {what}; {self.log_tail()}") from None
        if not raw:
            raise HopBenchError(f"the service exited while waiting for {what}; {self.log_tail()}")
        return raw.decode().strip()

    async def handled(self, timeout_s: float, what: str) -> tuple[str, int, int]:
        """The next handled event: (event_id, handler entry ns, handling done ns)."""
        kind, event_id, entered, done = (await self.readline(timeout_s, what)).split()
        if kind != "h":
            raise HopBenchError(f"unexpected service line {kind!r}")
        return event_id, int(entered), int(done)

    def log_tail(self, n: int = 2000) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return f"service log ({self.log_path}) ends: {text[-n:]!r}"

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._log is not None:
            self._log.close()


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (fields 14 and 15 of /proc/<pid>/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _request() -> Any:
    from contracts.events import ProfileRequested

    return ProfileRequested(run_id=RUN_ID, producer="perf/publisher", requested_by="perf")


async def measure_latency(bus: Any, service: ServiceProcess, n: int) -> list[float]:
    """Hop latencies in ms over n events, each published once the previous one is handled."""
    latencies: list[float] = []
    for i in range(WARMUP_EVENTS + n):
        event = _request()
        published = time.monotonic_ns()
        await bus.publish(event)
        event_id, entered, _ = await service.handled(HOP_TIMEOUT_S, f"event {i} to be handled")
        if event_id != event.event_id:
            raise HopBenchError(f"handled {event_id}, expected {event.event_id}: events out of order or lost")
        if i >= WARMUP_EVENTS:
            latencies.append((entered - published) / 1e6)
    return latencies


async def _handled_all(service: ServiceProcess, expected: set[str]) -> tuple[int, int]:
    """Read the service's lines until every expected event was handled once: (last done ns,
    handler runs beyond the first). A repeat is counted, not fatal: it is a finding."""
    n = len(expected)
    last_done, repeated = 0, 0
    seen: set[str] = set()
    deadline = time.monotonic() + max(120.0, n / 50.0)
    while len(seen) < n:
        event_id, _, done = await service.handled(max(1.0, deadline - time.monotonic()), f"{n} events handled")
        if event_id not in expected:
            raise HopBenchError(f"handled {event_id}, which this phase did not publish")
        if event_id in seen:
            repeated += 1
            continue
        seen.add(event_id)
        last_done = max(last_done, done)
    return last_done, repeated


async def _publish_all(bus: Any, events: Sequence[Any]) -> None:
    for start in range(0, len(events), PUBLISH_CONCURRENCY):
        await asyncio.gather(*(bus.publish(event) for event in events[start : start + PUBLISH_CONCURRENCY]))


async def measure_throughput(bus: Any, service: ServiceProcess, n: int, client: Any) -> dict[str, float]:
    """Events/s from the first publish to the end of the last handling, over n events."""
    events = [_request() for _ in range(n)]
    expected = {event.event_id for event in events}
    reader = asyncio.create_task(_handled_all(service, expected))
    assert service.proc is not None
    cpu_before = process_cpu_s(service.proc.pid)
    first = time.monotonic_ns()
    await _publish_all(bus, events)
    published = time.monotonic_ns()
    last_done, repeated = await reader
    cpu_used = process_cpu_s(service.proc.pid) - cpu_before
    repeated += await _late_repeats(service, client, bus.stream_of(SCHEMA), expected)
    return {
        "events_per_s": n / ((last_done - first) / 1e9),
        "publish_per_s": n / ((published - first) / 1e9),
        "repeated_runs": repeated,
        "service_cpu_ms_per_event": cpu_used / n * 1e3,
    }


async def measure_drain(bus: Any, service: ServiceProcess, n: int, client: Any) -> dict[str, float]:
    """Events/s of the service draining a backlog of n events alone: stopped while they are
    published, timed from its continuation to the end of the last handling."""
    events = [_request() for _ in range(n)]
    expected = {event.event_id for event in events}
    assert service.proc is not None
    pid = service.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        await _publish_all(bus, events)
        cpu_before = process_cpu_s(pid)
        resumed = time.monotonic_ns()
    finally:
        os.kill(pid, signal.SIGCONT)
    last_done, repeated = await _handled_all(service, expected)
    cpu_used = process_cpu_s(pid) - cpu_before
    repeated += await _late_repeats(service, client, bus.stream_of(SCHEMA), expected)
    return {
        "drain_events_per_s": n / ((last_done - resumed) / 1e9),
        "drain_repeated_runs": repeated,
        "drain_service_cpu_ms_per_event": cpu_used / n * 1e3,
    }


async def _late_repeats(service: ServiceProcess, client: Any, stream: str, expected: set[str]) -> int:
    """Handler runs that come after every event was handled once (a redelivery
    of a message already done); waits until the group has nothing pending."""
    repeated = 0
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        try:
            event_id, _, _ = await service.handled(0.5, "late repeats")
        except HopTimeout:
            pending = await client.xpending(stream, SERVICE)
            if pending["pending"] == 0:
                return repeated
            continue
        if event_id in expected:
            repeated += 1
    raise HopBenchError(f"{stream} still has pending messages 60 s after the last event was handled")


async def _measure(ctx: Any, prefix: str) -> dict[str, Any]:
    import redis.asyncio as aioredis

    from services.runtime.delivery.broker import Bus, make_broker
    from services.runtime.settings import RuntimeSettings

    service = ServiceProcess(ctx.redis_url, prefix, ctx.workdir)
    broker = make_broker(RuntimeSettings(redis_url=ctx.redis_url, stream_prefix=prefix))
    client = aioredis.Redis.from_url(ctx.redis_url)
    await broker.connect()
    try:
        await service.start()
        bus = Bus(broker, prefix)
        latencies = await measure_latency(bus, service, LATENCY_EVENTS[ctx.quick])
        rates = await measure_throughput(bus, service, THROUGHPUT_EVENTS[ctx.quick], client)
        rates |= await measure_drain(bus, service, THROUGHPUT_EVENTS[ctx.quick], client)
    finally:
        await service.stop()
        await broker.stop()
        await client.aclose()
    return {"latencies_ms": latencies, **rates}


# --- the reference: redis-benchmark XADD --------------------------------------


def redis_benchmark_xadd(redis_url: str, key: str, requests: int, clients: int) -> dict[str, float]:
    """requests/s and latency percentiles (ms) of XADD key * f v, from redis-benchmark --csv."""
    exe = shutil.which("redis-benchmark")
    if exe is None:
        raise HopBenchError("redis-benchmark is not installed (Debian: apt-get install redis-tools)")
    argv = [exe, "-u", redis_url, "-n", str(requests), "-c", str(clients), "--csv", "XADD", key, "*", "f", "v"]
    if redis_url.startswith("rediss://"):
        argv.insert(1, "--tls")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise HopBenchError(f"redis-benchmark exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return parse_redis_benchmark_csv(done.stdout)


def parse_redis_benchmark_csv(text: str) -> dict[str, float]:
    rows = [row for row in csv.DictReader(io.StringIO(text)) if row.get("rps")]
    if len(rows) != 1:
        raise HopBenchError(f"expected one result row from redis-benchmark --csv, got: {text[-500:]!r}")
    row = rows[0]
    return {"rps": float(row["rps"]), "p50_ms": float(row["p50_latency_ms"]), "p99_ms": float(row["p99_latency_ms"])}


def _redis_version(redis_url: str) -> str:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        return str(client.info("server").get("redis_version"))
    finally:
        client.close()


def _service_settings(redis_url: str) -> str:
    """The service's settings that bear on the figures (its environment's, as the service reads them)."""
    from services.runtime.settings import RuntimeSettings

    s = RuntimeSettings(redis_url=redis_url)
    return (f"log level {s.log_level}, read block {s.read_block_ms} ms, reclaim idle {s.reclaim_idle_ms} ms, "
            f"max concurrency {s.max_concurrency}")


def _cleanup(redis_url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
    finally:
        client.close()


def bench(ctx: Any) -> list[dict[str, Any]]:
    from tests.perf.runner import make_row

    prefix = f"perfhop{uuid.uuid4().hex[:8]}"
    try:
        measured = asyncio.run(_measure(ctx, prefix))
        bulk = redis_benchmark_xadd(ctx.redis_url, f"{prefix}:bench", XADD_REQUESTS[ctx.quick], clients=50)
        _cleanup(ctx.redis_url, prefix)
        rtt = redis_benchmark_xadd(ctx.redis_url, f"{prefix}:bench", XADD_RTT_REQUESTS[ctx.quick], clients=1)
    finally:
        _cleanup(ctx.redis_url, prefix)

    latencies = measured["latencies_ms"]
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    n = len(latencies)
    setup = {
        "redis_version": _redis_version(ctx.redis_url),
        "service_settings": _service_settings(ctx.redis_url),
        "publish_concurrency": PUBLISH_CONCURRENCY,
    }
    rows = [
        make_row(
            "hop.latency.p50", p50, "ms", goal=f"<= {P50_GOAL_MS:g} ms", passed=p50 <= P50_GOAL_MS,
            reference="redis-benchmark XADD p50, 1 client", reference_value=rtt["p50_ms"],
        )
        | {"samples": n},
        make_row(
            "hop.latency.p99", p99, "ms", goal=f"<= {P99_GOAL_MS:g} ms", passed=p99 <= P99_GOAL_MS,
            reference="redis-benchmark XADD p99, 1 client", reference_value=rtt["p99_ms"],
        )
        | {"samples": n},
        make_row(
            "hop.throughput", measured["events_per_s"], "events/s",
            goal=f">= {RATE_GOAL:g} events/s per instance", passed=measured["events_per_s"] >= RATE_GOAL,
            reference="redis-benchmark XADD, 50 clients", reference_value=bulk["rps"],
        )
        | {"samples": THROUGHPUT_EVENTS[ctx.quick]},
        make_row(
            "hop.drain", measured["drain_events_per_s"], "events/s",
            goal=f">= {RATE_GOAL:g} events/s per instance", passed=measured["drain_events_per_s"] >= RATE_GOAL,
            reference="redis-benchmark XADD, 50 clients", reference_value=bulk["rps"],
        )
        | {"samples": THROUGHPUT_EVENTS[ctx.quick],
           "service_cpu_ms_per_event": round(measured["drain_service_cpu_ms_per_event"], 4)},
        make_row(
            "hop.repeated_runs", float(measured["repeated_runs"] + measured["drain_repeated_runs"]), "handler runs",
            goal="0: a delivered event runs its step once",
            passed=measured["repeated_runs"] + measured["drain_repeated_runs"] == 0,
        )
        | {"samples": 2 * THROUGHPUT_EVENTS[ctx.quick]},
        make_row(
            "hop.service_cpu", measured["service_cpu_ms_per_event"], "ms/event",
            goal="none: 0.5 ms/event is 2,000 events/s on one free core", passed=None,
        )
        | {"samples": THROUGHPUT_EVENTS[ctx.quick]},
        make_row(
            "hop.publish_rate", measured["publish_per_s"], "events/s",
            goal="none: shows whether the publisher limited hop.throughput", passed=None,
            reference="redis-benchmark XADD, 50 clients", reference_value=bulk["rps"],
        ),
    ]
    return [{**row, "setup": setup} for row in rows]


if __name__ == "__main__":
    if sys.argv[1:] != ["serve"]:
        sys.exit("usage: python -m tests.perf.bench_hop serve  (the service side; run benches with tests.perf.runner)")
    serve_main()
