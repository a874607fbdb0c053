"""Soak: 1,000 runs' events through the streams, the real journal and its trimming; Redis stays bounded.

Issue 40, scenario 8: before, nothing trimmed the streams, so Redis grew with every event until
the kernel killed it, and `status` read every entry of every stream (0.45 s per 100,000 events).

What runs: the journal as a real process (`python -m services.runtime.main journal`, appending each
event to its run's events.jsonl and trimming, services/journal/trim.py) on ctx.redis_url, under a
stream prefix of this run alone, with SPECDEC_STREAM_RETENTION_S=0 (the default hour of retention
would keep every event of a soak that lasts minutes). Each run's events are synthesised, one valid event of every
catalogue schema per run plus five more bench trials (36 events), published through the Bus as a
service publishes them. Every other consumer group the catalogue names is created first, as each
service does when it starts, and a stand-in reader per group reads and acks its entries while
the publishing goes on (what the services would do; they do no work here).

At each checkpoint (10, 100, 1,000 runs; quick: 3, 10), once the journal and the readers have
taken everything and the journal has swept once more (SWEEP_S): the entries the streams hold and their memory (MEMORY
USAGE), the ledger's
keys (the journal's done marks, one per event, kept DONE_TTL_S), Redis's used_memory (the whole
server's: other users of a shared Redis count too), and the in-process `status` use case's median
latency for the first run (its events long trimmed from the streams, read from its events.jsonl).

Rows: per checkpoint, the entries held against the events published (goal: at most 5 % of them
at the last checkpoint), and `status` against its latency at the first checkpoint (goal: at most
2x). The per-checkpoint table is printed, and every figure is in the row's `checkpoints` key.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from services.journal.trim import SWEEP_S
from tests.perf.bench_idle import Instance
from tests.perf.runner import PerfError, make_row

CHECKPOINTS = {True: (3, 10), False: (10, 100, 1000)}
EXTRA_TRIALS = 5
STATUS_REPEATS = {True: 5, False: 21}
START_TIMEOUT_S = 60.0
CATCH_UP_TIMEOUT_S = 1800.0
ENTRIES_GOAL = 0.05
STATUS_GOAL = 2.0


class SoakBenchError(PerfError):
    """The journal did not start, or did not take the events in time."""


def run_events(run_id: str) -> list[Any]:
    """One valid event of every catalogue schema for the run, and EXTRA_TRIALS more trials."""
    from contracts.catalogue import CATALOGUE
    from tests.unit.contracts.test_events import PAYLOADS

    events = [spec.model(run_id=run_id, producer="soak/1", **PAYLOADS[spec.schema]) for spec in CATALOGUE]
    trial = next(spec.model for spec in CATALOGUE if spec.schema == "bench.trial.completed")
    events += [trial(run_id=run_id, producer="soak/1", **{**PAYLOADS[trial.SCHEMA], "trial": i + 1})
               for i in range(EXTRA_TRIALS)]
    return events


class Readers:
    """A stand-in reader for every (stream, group) the catalogue names: reads and acks, in a thread."""

    def __init__(self, redis_url: str, prefix: str) -> None:
        import redis

        from contracts.catalogue import CATALOGUE

        self.client = redis.Redis.from_url(redis_url)
        self.pairs = [(spec.stream(prefix), group) for spec in CATALOGUE for group in spec.consumers]
        for stream, group in self.pairs:
            self.client.xgroup_create(stream, group, id="0", mkstream=True)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def drain(self) -> int:
        taken = 0
        for stream, group in self.pairs:
            while reply := self.client.xreadgroup(group, f"{group}-soak", {stream: ">"}, count=500):
                ids = [entry_id for _, entries in reply for entry_id, _ in entries]  # type: ignore[str-unpack,union-attr]  # [(stream, entries)]
                self.client.xack(stream, group, *ids)
                taken += len(ids)
        return taken

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self.drain():
                self._stop.wait(0.05)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.drain()
        self.client.close()


def journal_behind(client: Any, prefix: str) -> int:
    """Entries the journal has pending or not yet been delivered, over every stream."""
    from contracts.streams import JOURNAL, SCHEMAS, stream_name

    behind = 0
    for schema in SCHEMAS:
        stream = stream_name(prefix, schema)
        if not client.exists(stream):
            continue
        for group in client.xinfo_groups(stream):
            if group["name"] == JOURNAL.encode():
                behind += int(group["pending"]) + int(group.get("lag") or 0)
    return behind


def redis_figures(client: Any, prefix: str) -> dict[str, float]:
    from contracts.streams import SCHEMAS, stream_name

    streams = [stream_name(prefix, schema) for schema in SCHEMAS]
    entries = sum(client.xlen(s) for s in streams)
    stream_bytes = sum(client.memory_usage(s) or 0 for s in streams)
    ledger_keys = ledger_bytes = 0
    for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        ledger_keys += 1
        ledger_bytes += client.memory_usage(key) or 0
    return {"stream_entries": entries, "stream_mb": stream_bytes / 1e6, "ledger_keys": ledger_keys,
            "ledger_mb": ledger_bytes / 1e6, "used_memory_mb": int(client.info("memory")["used_memory"]) / 1e6}


async def status_latency_ms(redis_url: str, prefix: str, bundle_root: Path, run_id: str, *, repeats: int) -> float:
    from services.app.context import connect
    from services.app.runs import ops
    from services.runtime.settings import RuntimeSettings

    settings = RuntimeSettings(redis_url=redis_url, redis_url_file="", stream_prefix=prefix, bundle_root=bundle_root)
    times = []
    async with connect(settings) as session:
        for _ in range(repeats):
            started = time.perf_counter()
            status = await ops.status(session, run_id)
            times.append(time.perf_counter() - started)
            if status.events != len(run_events(run_id)):
                raise SoakBenchError(f"status of {run_id} saw {status.events} events, not {len(run_events(run_id))}")
    return 1000 * statistics.median(times)


async def publish(redis_url: str, prefix: str, runs: range) -> int:
    """Publish the runs' events; as the operator where there is one (only its user may write run.approved)."""
    from services.runtime.delivery.broker import Bus, make_broker
    from services.runtime.settings import RuntimeSettings

    url = os.environ.get("SPECDEC_OPERATOR_REDIS_URL") or redis_url
    broker = make_broker(RuntimeSettings(redis_url=url, redis_url_file="", stream_prefix=prefix))
    await broker.connect()
    bus, published = Bus(broker, prefix), 0
    try:
        for n in runs:
            for event in run_events(f"soak-{n:05d}"):
                await bus.publish(event)
                published += 1
    finally:
        await broker.stop()
    return published


def soak(redis_url: str, workdir: Path, checkpoints: tuple[int, ...], repeats: int) -> list[dict[str, Any]]:
    import redis

    prefix = f"soak{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_url)
    readers = Readers(redis_url, prefix)
    # Retention 0: trimmed as soon as every group acked (the default keeps an hour, which this soak outruns).
    os.environ["SPECDEC_STREAM_RETENTION_S"] = "0"
    try:
        journal = Instance("journal", redis_url, prefix, workdir)
    finally:
        del os.environ["SPECDEC_STREAM_RETENTION_S"]
    figures: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not journal.started():
            if time.monotonic() > deadline:
                raise SoakBenchError(f"the journal did not start in {START_TIMEOUT_S:g} s; {journal.log_tail()}")
            time.sleep(0.2)
        done, published = 0, 0
        for runs in checkpoints:
            started = time.monotonic()
            published += asyncio.run(publish(redis_url, prefix, range(done, runs)))
            done = runs
            while journal_behind(client, prefix):
                if time.monotonic() - started > CATCH_UP_TIMEOUT_S:
                    raise SoakBenchError(f"the journal is {journal_behind(client, prefix)} entries behind after "
                                         f"{CATCH_UP_TIMEOUT_S:g} s; {journal.log_tail()}")
                time.sleep(0.1)
            readers.drain()
            took = time.monotonic() - started
            time.sleep(SWEEP_S + 1.0)  # the journal's next sweep trims what the readers acked after its last trim
            latency = asyncio.run(
                status_latency_ms(redis_url, prefix, workdir / "bundles", "soak-00000", repeats=repeats)
            )
            figures.append({"runs": runs, "events": published, "publish_and_journal_s": took,
                            **redis_figures(client, prefix), "status_ms": latency})
    finally:
        readers.close()
        journal.stop()
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
        client.close()
    return figures


def table(figures: list[dict[str, Any]]) -> str:
    head = ("runs", "events", "stream entries", "streams MB", "ledger keys", "ledger MB", "used_memory MB", "status ms")
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for f in figures:
        lines.append(
            " | ".join(
                (
                    f"{f['runs']:,}",
                    f"{f['events']:,}",
                    f"{f['stream_entries']:,}",
                    f"{f['stream_mb']:.2f}",
                    f"{f['ledger_keys']:,}",
                    f"{f['ledger_mb']:.2f}",
                    f"{f['used_memory_mb']:.1f}",
                    f"{f['status_ms']:.1f}",
                )
            )
        )
    return "\n".join(lines)


def bench(ctx: Any) -> list[dict[str, Any]]:
    figures = soak(ctx.redis_url, ctx.workdir, CHECKPOINTS[ctx.quick], STATUS_REPEATS[ctx.quick])
    print(table(figures), flush=True)
    first, last = figures[0], figures[-1]
    rows = []
    for f in figures:
        share = f["stream_entries"] / f["events"]
        rows.append(
            make_row(
                f"soak.stream_entries.runs_{f['runs']}",
                f["stream_entries"],
                "entries",
                goal=f"<= {ENTRIES_GOAL:.0%} of published",
                passed=share <= ENTRIES_GOAL if f is last else None,
                reference="events published",
                reference_value=f["events"],
            )
        )
        rows.append(make_row(f"soak.status.runs_{f['runs']}", f["status_ms"], "ms", goal=f"<= {STATUS_GOAL:g}x",
                             passed=f["status_ms"] <= STATUS_GOAL * first["status_ms"] if f is last else None,
                             reference=f"status at {first['runs']} runs", reference_value=first["status_ms"]))
        rows.append(make_row(f"soak.used_memory.runs_{f['runs']}", f["used_memory_mb"], "MB", goal="report",
                             passed=None, reference=f"used_memory at {first['runs']} runs",
                             reference_value=first["used_memory_mb"]))
    rows[-1]["checkpoints"] = figures
    return rows


if __name__ == "__main__":
    import sys
    import tempfile

    from tests.perf.runner import PerfContext

    with tempfile.TemporaryDirectory() as scratch:
        url = os.environ.get("SPECDEC_REDIS_URL", "redis://127.0.0.1:6379/15")
        for row in bench(PerfContext(workdir=Path(scratch), quick="--quick" in sys.argv, redis_url=url)):
            print(row["name"], row["value"], row["unit"], row["ratio"])
