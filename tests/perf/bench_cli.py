"""How long the `specdec` command takes to start and finish, whole process, on a real Redis.

Each row is the median wall time of N fresh processes (quick: 5, full: 21) of
the installed console script (`.venv/bin/specdec`, falling back to
`python -m services.cli.main`), spawned by `subprocess.run` and timed from
spawn to exit, so the figure is what an operator waits at a terminal:
interpreter start, imports, settings, the Redis round trips, the output.

- `cli.help`: `specdec --help` (the whole parser is built: every subcommand).
- `cli.status`: `specdec status RUN` for a run with no event (reads every
  catalogue stream, decodes the one event there, then exits 2 with "no event
  of run ...").
- `cli.watch`: `specdec watch --from-start --timeout 0` with that one event
  (`profile.requested`, published through the Bus as a service would): it
  prints the event's line and stops at the first check of the timeout
  (without an event, watch waits out its 1 s read block first, which would
  time the block, not the command).
- `cli.dlq_list`: `specdec dlq list` on an empty dead-letter stream.
- `cli.python_startup`: `python -c pass`, the reference: the interpreter's own start.

Commands run round-robin (one of each per round), so load from other work on
a shared machine skews every command alike; each row also carries the
fastest run (min_s) and the median CPU time (cpu_s: user + system of the
process), which other load inflates far less than wall time. Every run's exit status and
output are checked: a command that fails differently than expected is a
crashed bench, not a figure. Redis: ctx.redis_url (the runner's; standalone
`python -m tests.perf.bench_cli` uses SPECDEC_REDIS_URL or db 15), under a
stream prefix of this run alone, deleted afterwards.

Goal: each command <= 0.5 s on the 2-core development machine.
Measured there (21 runs, medians; python -c pass 0.036 s): before the lazy
imports help 2.65 s, status 3.07 s, watch 3.16 s, dlq list 3.20 s; after
0.32 s, 1.04 s, 0.93 s, 0.91 s; then, on a quiet machine (load 0.6), with the
reading commands loading neither faststream (services.runtime.delivery.wire reads the
entries), structlog, the event models (contracts.streams names the streams) nor
redis-py's optional OpenTelemetry metrics SDK: help 0.30 s, status 0.44 s, watch
0.46 s, dlq list 0.47 s (0.52 / 0.50 / 0.50 s before the SDK was skipped). What
they still import, ~0.35 s: pydantic-settings with pydantic (0.10-0.17 s, the
settings every command validates first), redis.asyncio with asyncio (0.11-0.13 s),
the bundle store and the CLI's own modules (0.03 s), the interpreter and site
(0.05 s, the editable install's path finder included).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from tests.perf.runner import PerfError

GOAL_S = 0.5
RUNS = {True: 5, False: 21}
REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_ID = "perf-cli-no-such-run"
WATCHED_RUN = "perf-cli-watched"


class CliBenchError(PerfError):
    """A timed command did not behave as the bench expects (exit status or output)."""


def _specdec() -> list[str]:
    script = Path(sys.executable).parent / "specdec"
    return [str(script)] if script.exists() else [sys.executable, "-m", "services.cli.main"]


# name -> (argv after `specdec`, expected exit status, text the output must contain)
COMMANDS: dict[str, tuple[list[str], int, str]] = {
    "help": (["--help"], 0, "usage: specdec"),
    "status": (["status", RUN_ID], 2, f"no event of run {RUN_ID}"),
    "watch": (["watch", "--from-start", "--timeout", "0"], 0, WATCHED_RUN),
    "dlq_list": (["dlq", "list"], 0, "dead-letter stream is empty"),
}


def _seed(redis_url: str, prefix: str) -> None:
    """One event on its stream, published as a service publishes it (faststream's binary
    envelope), so that `watch --from-start` prints a line at once and `status` decodes it."""
    from contracts.events import ProfileRequested
    from tests.support.publishing import publish_event

    publish_event(redis_url, prefix, ProfileRequested(run_id=WATCHED_RUN, producer="perf", requested_by="perf"))


def _cleanup(redis_url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
    finally:
        client.close()


def _time_one(argv: list[str], env: dict[str, str], expected_rc: int, expect: str) -> tuple[float, float]:
    """(wall s, CPU s) of one process; the CPU time (user + system, from the rusage of the
    one child reaped in between) shows how much of the wall time other load added."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != expected_rc or expect not in done.stdout + done.stderr:
        raise CliBenchError(
            f"{' '.join(argv[1:]) or argv[0]} exited {done.returncode} (expected {expected_rc}, output with "
            f"{expect!r}): stdout {done.stdout[-400:]!r} stderr {done.stderr[-400:]!r}"
        )
    return elapsed, cpu


def measure(redis_url: str, workdir: Path, runs: int) -> dict[str, list[tuple[float, float]]]:
    """(wall s, CPU s) of every command and of `python -c pass`, `runs` of each, round-robin."""
    prefix = f"perfcli{uuid.uuid4().hex[:8]}"
    env = {key: value for key, value in os.environ.items() if not key.startswith("SPECDEC_")}
    env |= {"SPECDEC_REDIS_URL": redis_url, "SPECDEC_STREAM_PREFIX": prefix,
            "SPECDEC_BUNDLE_ROOT": str(workdir / "bundles")}
    specdec = _specdec()
    plan = {"python_startup": ([sys.executable, "-c", "pass"], 0, "")}
    plan |= {name: ([*specdec, *args], rc, expect) for name, (args, rc, expect) in COMMANDS.items()}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in plan}
    try:
        _seed(redis_url, prefix)
        for _ in range(runs):
            for name, (argv, rc, expect) in plan.items():
                times[name].append(_time_one(argv, env, rc, expect))
    finally:
        _cleanup(redis_url, prefix)
    return times


def bench(ctx: Any) -> list[dict[str, Any]]:
    from tests.perf.runner import make_row

    runs = RUNS[bool(ctx.quick)]
    times = measure(ctx.redis_url, Path(ctx.workdir), runs)
    wall = {name: [w for w, _ in samples] for name, samples in times.items()}
    cpu = {name: statistics.median(c for _, c in samples) for name, samples in times.items()}
    reference = statistics.median(wall["python_startup"])
    rows = [
        make_row(
            "cli.python_startup", reference, "s", goal="none: the interpreter's own start (reference)", passed=None
        )
        | {"samples": runs, "min_s": min(wall["python_startup"]), "cpu_s": cpu["python_startup"]}
    ]
    for name, (args, _, _) in COMMANDS.items():
        median = statistics.median(wall[name])
        rows.append(
            make_row(f"cli.{name}", median, "s", goal=f"<= {GOAL_S:g} s whole process", passed=median <= GOAL_S,
                     reference="python -c pass", reference_value=reference)
            | {"samples": runs, "min_s": min(wall[name]), "max_s": max(wall[name]), "cpu_s": cpu[name],
               "command": "specdec " + " ".join(args)}
        )
    return rows


if __name__ == "__main__":
    import tempfile

    from tests.perf.runner import PerfContext, render_table

    quick = "--quick" in sys.argv[1:]
    with tempfile.TemporaryDirectory(prefix="specdec-bench-cli-") as scratch:
        context = PerfContext(workdir=Path(scratch), quick=quick,
                              redis_url=os.environ.get("SPECDEC_REDIS_URL") or "redis://127.0.0.1:6379/15")
        produced = bench(context)
        print(render_table(produced))
        for row in produced:
            print(f"{row['name']}: min {row['min_s']:.3f} s, median CPU {row['cpu_s']:.3f} s")
