"""One measured window driven by several client processes (`WindowSpec.client_processes` > 1).

One Python process receives about one core's worth of chunks per second; past that, the client would
delay arrival times. The window stays one window: one arrival schedule, the cap split so the processes
never exceed it together, one start instant on CLOCK_MONOTONIC for all, the records merged into one
`WindowRecord` (docs/bench-loadgen.md#several-client-processes-loadgen_procspy)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Sequence

import numpy as np
import orjson

from services.bench.errors import PromptError, WindowProcessFailed
from services.bench.loadgen.loadgen import LoadGenerator, WindowRecord, WindowSpec, http1_pool, scrape
from services.bench.loadgen.prompts import Prompt
from services.bench.loadgen.timing import RequestRecord, arrival_offsets_s
from services.runtime.errors import SpecdecError

START_LEAD_S = 0.2  # ahead of "now" when the start is sent: every child reads it before it is due
READY = b"ready\n"
CLOCK_SLACK_S = 1.0  # how far the start may be off on a child's clock: scheduling delay, not another clock


class ClockNotShared(WindowProcessFailed):
    """A client process reads a different time.monotonic() than its parent."""


def shares(total: int, n: int) -> list[int]:
    """`total` split over n processes: n // total each, the first `total mod n` one more."""
    return [total // n + (1 if p < total % n else 0) for p in range(n)]


def max_overlap(records: Sequence[RequestRecord]) -> int:
    """The most requests in flight at one instant, from their start/end times (ends before starts at a tie)."""
    events = sorted([(r.start_s, 1) for r in records if r.end_s is not None]
                    + [(r.end_s, -1) for r in records if r.end_s is not None])
    most = live = 0
    for _, step in events:
        live += step
        most = max(most, live)
    return most


def child_specs(spec: WindowSpec) -> list[WindowSpec]:
    """Each process's spec: its share of the cap and of the warm-up, one process each."""
    n = spec.client_processes
    caps = shares(spec.max_concurrency, n) if spec.max_concurrency else [None] * n
    warm = shares(spec.warmup_requests, n)
    return [WindowSpec.model_validate({**spec.model_dump(), "max_concurrency": cap, "warmup_requests": w,
                                       "client_processes": 1}) for cap, w in zip(caps, warm, strict=True)]


async def drive_window(spec: WindowSpec, prompts: Sequence[Prompt]) -> WindowRecord:
    """One window as the spec asks: in this process, or from spec.client_processes child processes."""
    if spec.client_processes > 1:
        return await run_window_procs(spec, prompts)
    return await LoadGenerator(spec).run_window(prompts)


async def run_window_procs(
    spec: WindowSpec, prompts: Sequence[Prompt], *, python: str = sys.executable
) -> WindowRecord:
    """Drive one window from spec.client_processes child processes; the merged record."""
    n = spec.client_processes
    if not prompts:
        raise PromptError("a window needs at least one prompt; check the corpus's heldout split or the shape count")
    if len(prompts) < n:
        raise PromptError(f"{len(prompts)} prompts cannot feed {n} client processes: use fewer processes")
    if spec.arrival == "inf":
        offsets = [0.0] * len(prompts)
    else:
        offsets = arrival_offsets_s(len(prompts), request_rate_per_s=spec.request_rate_per_s,
                                    burstiness=spec.schedule_burstiness, rng=np.random.default_rng(spec.seed))
    specs = child_specs(spec)
    children = []
    for p, child in enumerate(specs):
        mine = range(p, len(prompts), n)
        request = {"spec": child.model_dump(mode="json"), "prompts": [prompts[i].model_dump(mode="json") for i in mine],
                   "indices": list(mine), "offsets": [offsets[i] for i in mine]}
        proc = await asyncio.create_subprocess_exec(
            python, "-m", "services.bench.loadgen.loadgen_procs", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        proc.stdin.write(orjson.dumps(request) + b"\n")  # type: ignore[union-attr]  # piped above
        await proc.stdin.drain()  # type: ignore[union-attr]  # piped above
        children.append(proc)
    errs = [asyncio.create_task(proc.stderr.read()) for proc in children]  # type: ignore[union-attr]  # piped above
    pool = http1_pool(spec, time.monotonic)
    try:
        for proc, err in zip(children, errs, strict=True):
            line = await proc.stdout.readline()  # type: ignore[union-attr]  # piped above
            if line != READY:
                await proc.wait()
                raise WindowProcessFailed(_failure(proc, await err))
        before, err_before = await scrape(pool)
        origin = time.monotonic() + START_LEAD_S
        for proc in children:
            proc.stdin.write(b"%r\n" % origin)  # type: ignore[union-attr]  # piped above
            await proc.stdin.drain()  # type: ignore[union-attr]  # piped above
            proc.stdin.close()  # type: ignore[union-attr]  # piped above
        parts: list[WindowRecord] = []
        for proc, err in zip(children, errs, strict=True):
            out = await proc.stdout.read()  # type: ignore[union-attr]  # piped above
            code = await proc.wait()
            if code != 0:
                raise WindowProcessFailed(_failure(proc, await err))
            parts.append(WindowRecord.model_validate_json(out))
        after, err_after = await scrape(pool)
    finally:
        await pool.aclose()
        for proc in children:
            if proc.returncode is None:
                proc.kill()  # only our own children, by handle
                await proc.wait()
    records = sorted((r for part in parts for r in part.requests), key=lambda r: r.index)
    end = max([origin, *(r.end_s or origin for r in records)])
    errors = [e for e in (err_before, err_after) if e]
    return WindowRecord(
        spec=spec,
        duration_s=max(0.0, end - origin),
        requests=records,
        warmup_completed=sum(p.warmup_completed for p in parts),
        warmup_failed=sum(p.warmup_failed for p in parts),
        max_in_flight=max_overlap(records),
        metrics_before=before,
        metrics_after=after,
        metrics_error="; ".join(errors) or None,
    )


def _failure(proc: asyncio.subprocess.Process, stderr: bytes) -> str:
    tail = stderr[-2000:].decode("utf-8", "replace").strip() or "no output"
    return f"a client process exited with {proc.returncode}: {tail}"


async def _child() -> int:
    loop = asyncio.get_running_loop()
    line = await loop.run_in_executor(None, sys.stdin.buffer.readline)
    try:
        request = orjson.loads(line)
        spec = WindowSpec.model_validate(request["spec"])
        prompts = [Prompt.model_validate(p) for p in request["prompts"]]
        indices, offsets = list(request["indices"]), [float(x) for x in request["offsets"]]
    except (ValueError, KeyError, TypeError) as exc:
        print(f"specdec client process: unreadable request on stdin: {exc}", file=sys.stderr)
        return 2

    async def ready() -> float:
        sys.stdout.buffer.write(READY)
        sys.stdout.buffer.flush()
        start = float(await loop.run_in_executor(None, sys.stdin.buffer.readline))
        # The start was read on the parent's clock 0.2 s ahead: far off on ours means the two
        # processes do not share the clock, and merged records would be on different axes.
        ahead = start - time.monotonic()
        if not -CLOCK_SLACK_S < ahead < START_LEAD_S + CLOCK_SLACK_S:
            raise ClockNotShared(f"the parent's start time is {ahead:.3f} s from this process's time.monotonic(): "
                                 "the client processes do not share one clock")
        return start

    try:
        record = await LoadGenerator(spec).run_window_at(prompts, ready=ready, indices=indices, offsets=offsets,
                                                         scrape=False)
    except (SpecdecError, ValueError, ClockNotShared) as exc:
        print(f"specdec client process: {exc}", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(record.model_dump_json().encode() + b"\n")
    sys.stdout.buffer.flush()
    return 0


def main() -> int:
    return asyncio.run(_child())


if __name__ == "__main__":
    sys.exit(main())
