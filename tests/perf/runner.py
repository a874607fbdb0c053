"""Benchmark runner: `python -m tests.perf.runner [--quick] [--only NAME ...] [--out DIR]`.

Every module `tests/perf/bench_<name>.py` defines `bench(ctx: PerfContext) -> list[dict]`.
The runner runs each one (a bench that raises, or returns malformed rows, becomes
one failed row and the others still run), prints one table and writes
`<out>/<timestamp>.json` and `<out>/latest.json` with the machine's facts beside
the rows.

A benchmark reports; it does not gate: the exit status is 0 when goals are
missed and 1 only when a bench crashed (2: a usage error such as an unknown
`--only` name).
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
ROW_KEYS = ("name", "value", "unit", "reference", "reference_value", "ratio", "goal", "passed")
TABLE_COLUMNS = ("name", "value", "unit", "reference", "ratio", "goal", "passed")


@dataclass
class PerfContext:
    """What a bench gets: a scratch folder of its own, the smoke flag, the Redis to use."""

    workdir: Path
    quick: bool
    redis_url: str = DEFAULT_REDIS_URL


class PerfError(Exception):
    """Root of the runner's errors."""


class BenchError(PerfError):
    """A bench returned something that is not a list of rows (see ROW_KEYS)."""


class UnknownBench(PerfError):
    """--only named a bench that has no module; the message lists those that exist."""


def make_row(
    name: str,
    value: float,
    unit: str,
    *,
    goal: str,
    passed: bool | None,
    reference: str | None = None,
    reference_value: float | None = None,
) -> dict[str, Any]:
    """One result row; ratio is value / reference_value when both are known."""
    ratio = None
    if reference_value not in (None, 0) and value is not None and math.isfinite(value):
        ratio = value / reference_value
    return {
        "name": name,
        "value": value,
        "unit": unit,
        "reference": reference,
        "reference_value": reference_value,
        "ratio": ratio,
        "goal": goal,
        "passed": passed,
    }


def discover(package: str = "tests.perf") -> list[str]:
    """Names (`bench_<name>`) of the bench modules in a package's folder, sorted."""
    module = importlib.import_module(package)
    names: set[str] = set()
    for folder in module.__path__:
        names.update(path.stem for path in Path(folder).glob("bench_*.py"))
    return sorted(names)


def select(available: Sequence[str], only: Sequence[str]) -> list[str]:
    """The benches named by --only (`hop` or `bench_hop`); every one when none is named."""
    if not only:
        return list(available)
    wanted = [name if name.startswith("bench_") else f"bench_{name}" for name in only]
    unknown = [name for name in wanted if name not in available]
    if unknown:
        raise UnknownBench(
            f"unknown benchmark(s): {', '.join(unknown)}; available: {', '.join(available) or 'none'}"
        )
    return [name for name in available if name in wanted]


def _check_rows(rows: Any) -> list[dict[str, Any]]:
    if not isinstance(rows, list):
        raise BenchError(f"bench() must return a list of row dicts, not {type(rows).__name__}")
    for row in rows:
        if not isinstance(row, dict):
            raise BenchError(f"a row must be a dict, not {type(row).__name__}")
        missing = [key for key in ROW_KEYS if key not in row]
        if missing:
            raise BenchError(f"row {row.get('name')!r} lacks {', '.join(missing)}")
        if not isinstance(row["value"], (int, float)) or isinstance(row["value"], bool):
            raise BenchError(f"row {row['name']!r}: value must be a number, not {row['value']!r}")
    return rows


def crash_row(bench: str, error: str) -> dict[str, Any]:
    """The row that stands for a bench that crashed: no value, not passed, the error."""
    return {
        "name": bench,
        "value": None,
        "unit": "",
        "reference": None,
        "reference_value": None,
        "ratio": None,
        "goal": "bench runs to completion",
        "passed": False,
        "bench": bench,
        "error": error,
    }


def run_benches(
    package: str, names: Sequence[str], *, quick: bool, redis_url: str, scratch: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run each bench; returns (rows, per-bench records of duration and outcome)."""
    rows: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    for name in names:
        workdir = scratch / name
        workdir.mkdir(parents=True, exist_ok=True)
        ctx = PerfContext(workdir=workdir, quick=quick, redis_url=redis_url)
        print(f"running {name}{' (quick)' if quick else ''} ...", file=sys.stderr, flush=True)
        started = time.monotonic()
        try:
            module = importlib.import_module(f"{package}.{name}")
            bench: Callable[[PerfContext], Any] = module.bench
            produced = _check_rows(bench(ctx))
        except Exception as exc:  # noqa: BLE001 - one bench's crash is a failed row; the rest still run
            error = f"{type(exc).__name__}: {exc}"
            traceback.print_exc(file=sys.stderr)
            rows.append(crash_row(name, error))
            records.append({"bench": name, "duration_s": time.monotonic() - started, "crashed": True, "error": error})
            continue
        rows.extend({**row, "bench": name, "error": None} for row in produced)
        records.append({"bench": name, "duration_s": time.monotonic() - started, "crashed": False, "error": None})
    return rows, records


def _git_revision() -> str | None:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}-dirty" if dirty else head


def machine_facts() -> dict[str, Any]:
    """What the figures were measured on (evidence carries its identity)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "git_revision": _git_revision(),
        # On a shared machine other work skews every figure: the load is evidence too.
        "loadavg_1m_end": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


def render_table(rows: Sequence[dict[str, Any]]) -> str:
    """One fixed-width table of the rows (a crashed bench shows its error below)."""
    cells = [[_cell(row.get(column)) for column in TABLE_COLUMNS] for row in rows]
    widths = [max([len(column)] + [len(line[i]) for line in cells]) for i, column in enumerate(TABLE_COLUMNS)]
    lines = ["  ".join(column.ljust(widths[i]) for i, column in enumerate(TABLE_COLUMNS))]
    lines.append("  ".join("-" * width for width in widths))
    lines.extend("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in cells)
    for row in rows:
        if row.get("error"):
            lines.append(f"{row['name']}: CRASHED: {row['error']}")
    return "\n".join(lines)


def write_results(out: Path, document: dict[str, Any], stamp: str) -> Path:
    """Write `<stamp>.json` and `latest.json` (same bytes); returns the stamped path."""
    out.mkdir(parents=True, exist_ok=True)
    data = orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
    stamped = out / f"{stamp}.json"
    n = 1
    while stamped.exists():  # two runs in one second: keep both
        stamped = out / f"{stamp}-{n}.json"
        n += 1
    stamped.write_bytes(data)
    # latest.json via temp + rename, so a reader never sees half a file.
    tmp = out / ".latest.json.tmp"
    tmp.write_bytes(data)
    tmp.replace(out / "latest.json")
    return stamped


def main(argv: Sequence[str] | None = None, *, package: str = "tests.perf") -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.perf.runner", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke mode: each bench takes seconds")
    parser.add_argument(
        "--only", nargs="+", default=[], metavar="NAME", help="run only these benches (hop or bench_hop)"
    )
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "perf-results", help="results folder (default: perf-results/)"
    )
    args = parser.parse_args(argv)

    try:
        names = select(discover(package), args.only)
    except UnknownBench as exc:
        print(exc, file=sys.stderr)
        return 2
    if not names:
        print(f"no bench_*.py modules in {package}", file=sys.stderr)
        return 2
    redis_url = os.environ.get("SPECDEC_REDIS_URL") or DEFAULT_REDIS_URL
    started = datetime.now(UTC)
    load_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="specdec-perf-") as scratch:
        rows, records = run_benches(package, names, quick=args.quick, redis_url=redis_url, scratch=Path(scratch))
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    document = {
        "started_at": started.isoformat(),
        "duration_s": time.monotonic() - t0,
        "quick": args.quick,
        "machine": {**machine_facts(), "loadavg_1m_start": load_start},
        "benches": records,
        "rows": rows,
    }
    print(render_table(rows))
    path = write_results(args.out, document, stamp)
    print(f"results: {path} (and {args.out / 'latest.json'})")
    crashed = [record["bench"] for record in records if record["crashed"]]
    if crashed:
        print(f"crashed: {', '.join(crashed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
