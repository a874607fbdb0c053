"""Which client's TTFT and TPOT are right: both against a stand-in that knows the true values (run by bench_loadgen).

A paced SSE server (`python -m tests.perf.loadgen_truth serve`, its own process,
on the server's cores) answers every /v1/completions request with its first
chunk FIRST_S after it has read the request, then one TOKENS_PER_CHUNK-token
chunk every GAP_S, and notes per stream, on CLOCK_MONOTONIC (one clock for every
process of the host): when it had read the request, when it wrote the first
and the last token chunk. GET /stats returns those and forgets them.

One process (`... clients`) alternates specdec's load generator and vLLM's
benchmark client (`vllm.benchmarks.serve` as a library), TRUTH_RUNS runs each,
TRUTH_PROMPTS requests at TRUTH_CONCURRENCY. Per run and tool:

- TTFT excess: the client's median TTFT minus the server's (request read ->
  first token written): what the client adds to TTFT by its own send and
  receive paths;
- TPOT ratio: the client's median TPOT over the server's ((last - first token
  write) / (tokens - 1)).

vLLM's client stamps `time.perf_counter()` (CLOCK_MONOTONIC on Linux, the clock
of the server's notes) as its start, so its start times are matched to the
server's request times in order, which splits its excess into send and receive.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
FIRST_S = 0.030
GAP_S = 0.020
TOKENS_PER_CHUNK = 4
OUTPUT_TOKENS = 64
TRUTH_PROMPTS = 48
TRUTH_CONCURRENCY = 4
MODEL = "bench-model"
TPOT_TOLERANCE = 0.01


async def _serve(cores: set[int]) -> None:
    if cores:
        os.sched_setaffinity(0, cores)
    notes: list[tuple[float, float, float, int]] = []

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                method, path = head[0].split(" ")[:2]
                length = next((int(h.split(":", 1)[1]) for h in head[1:] if h.lower().startswith("content-length")), 0)
                body = await reader.readexactly(length) if length else b""
                read_at = time.monotonic()
                if method == "POST" and path == "/v1/completions":
                    await _stream(writer, int(json.loads(body)["max_tokens"]), read_at, notes)
                else:
                    out = json.dumps(notes).encode() if path == "/stats" else b""
                    if path == "/stats":
                        notes.clear()
                    status = b"200 OK" if path in ("/stats", "/metrics") else b"404 Not Found"
                    writer.write(b"HTTP/1.1 %s\r\ncontent-length: %d\r\n\r\n%s" % (status, len(out), out))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client closed its keep-alive connection
        finally:
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(1800)  # bounded: the bench stops it earlier, by pid


async def _stream(writer: asyncio.StreamWriter, tokens: int, read_at: float, notes: list) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    await asyncio.sleep(FIRST_S)
    sent, first, last = 0, 0.0, 0.0
    while sent < tokens:
        if sent:
            await asyncio.sleep(GAP_S)
        n = min(TOKENS_PER_CHUNK, tokens - sent)
        sent += n
        chunk = {"id": "t", "object": "text_completion", "model": MODEL,
                 "choices": [{"index": 0, "text": " t" * n, "finish_reason": "length" if sent == tokens else None}],
                 "usage": {"prompt_tokens": 8, "completion_tokens": sent, "total_tokens": 8 + sent}}
        event = b"data: " + json.dumps(chunk).encode() + b"\n\n"
        writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        last = time.monotonic()
        first = first or last
    final = {
        "id": "t",
        "choices": [],
        "usage": {"prompt_tokens": 8, "completion_tokens": sent, "total_tokens": 8 + sent},
    }
    tail = b"data: " + json.dumps(final).encode() + b"\n\ndata: [DONE]\n\n"
    writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(tail), tail))
    notes.append((read_at, first, last, tokens))


def _compare(base_url: str, starts: list[float], ttfts: list[float], tpots: list[float]) -> dict[str, float]:
    import httpx

    notes = sorted(httpx.get(f"{base_url}/stats", timeout=30).json())[-len(starts):]  # the window's streams
    true_ttft = statistics.median(first - read for read, first, _, _ in notes)
    true_tpot = statistics.median((last - first) / (n - 1) for _, first, last, n in notes)
    pairs = sorted(zip(starts, ttfts, strict=False))
    return {
        "ttft_excess_ms": (statistics.median(ttfts) - true_ttft) * 1e3,
        "tpot_ratio": statistics.median(tpots) / true_tpot,
        "send_ms": statistics.median((note[0] - start) * 1e3 for note, (start, _) in zip(notes, pairs, strict=False)),
        "receive_ms": statistics.median(
            (start + ttft - note[1]) * 1e3 for note, (start, ttft) in zip(notes, pairs, strict=False)
        ),
        "load_1m": os.getloadavg()[0],
    }


def _clients(args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    import httpx
    from vllm.benchmarks import serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from services.bench.loadgen.loadgen import LoadGenerator, WindowSpec
    from services.bench.loadgen.prompts import ChatTurn, Prompt
    from services.bench.loadgen.timing import derive

    prompts = [
        Prompt(
            prompt_id=f"t{i}",
            messages=[ChatTurn(role="user", content="hello")],
            text="hello",
            input_tokens=8,
            max_output_tokens=OUTPUT_TOKENS,
            ignore_eos=True,
        )
        for i in range(TRUTH_PROMPTS)
    ]
    # One warm-up request each: vLLM's client sends its "initial single prompt test run" first.
    spec = WindowSpec(base_url=args.base_url, model=MODEL, max_concurrency=TRUTH_CONCURRENCY, warmup_requests=1)
    runs: dict[str, list[dict[str, float]]] = {"specdec": [], "vllm": []}
    for _ in range(args.runs):
        httpx.get(f"{args.base_url}/stats", timeout=30)  # forget earlier streams
        window = asyncio.run(LoadGenerator(spec).run_window(prompts))
        timings = [derive(r) for r in window.requests]
        runs["specdec"].append(
            _compare(
                args.base_url,
                [r.start_s for r in window.requests],
                [t.ttft_s for t in timings],
                [t.tpot_s for t in timings if t.tpot_s is not None],
            )
        )
        httpx.get(f"{args.base_url}/stats", timeout=30)
        parser = FlexibleArgumentParser()
        serve.add_cli_args(parser)
        result = serve.main(parser.parse_args([
            "--backend", "openai", "--base-url", args.base_url, "--endpoint", "/v1/completions", "--model", MODEL,
            "--tokenizer", args.tokenizer, "--dataset-name", "random", "--random-input-len", "8",
            "--random-output-len", str(OUTPUT_TOKENS), "--num-prompts", str(TRUTH_PROMPTS),
            "--max-concurrency", str(TRUTH_CONCURRENCY), "--ignore-eos", "--disable-tqdm",
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--save-detailed", "--seed", "0",
        ]))
        ok = [not e for e in result["errors"]]
        tpots = [(lat - ttft) / (n - 1) for lat, ttft, n, good in
                 zip(result["latencies"], result["ttfts"], result["output_lens"], ok, strict=False) if good and n > 1]
        runs["vllm"].append(
            _compare(
                args.base_url,
                [s for s, good in zip(result["start_times"], ok, strict=False) if good],
                [t for t, good in zip(result["ttfts"], ok, strict=False) if good],
                tpots,
            )
        )
    return runs


def run(workdir: Path, tokenizer: Path, server_cores: set[int], runs: int) -> list[dict[str, Any]]:
    """The truth rows: each client's TTFT excess and TPOT ratio against the paced stand-in's own clock."""
    from tests.perf.runner import make_row

    server = subprocess.Popen([sys.executable, "-m", "tests.perf.loadgen_truth", "serve", "--cores",
                               ",".join(map(str, sorted(server_cores)))],
                              cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out, log = workdir / "truth.json", workdir / "truth-clients.log"
    try:
        base_url = f"http://127.0.0.1:{int(server.stdout.readline())}"  # type: ignore[union-attr]  # piped
        with log.open("wb") as sink:
            proc = subprocess.run([sys.executable, "-m", "tests.perf.loadgen_truth", "clients", "--base-url", base_url,
                                   "--tokenizer", str(tokenizer), "--runs", str(runs), "--out", str(out)],
                                  cwd=REPO_ROOT, stdout=sink, stderr=subprocess.STDOUT, timeout=900)
        if proc.returncode != 0 or not out.is_file():
            raise RuntimeError(
                f"truth clients exited with {proc.returncode}; log tail:\n{log.read_text(errors='replace')[-3000:]}"
            )
    finally:
        server.terminate()
        server.wait(timeout=10)
    data = json.loads(out.read_text())

    def med(tool: str, key: str) -> float:
        return statistics.median(r[key] for r in data[tool])

    loads = [r["load_1m"] for tool in data.values() for r in tool]
    setup = (
        f"paced stand-in ({FIRST_S * 1e3:g} ms to the first chunk, then {TOKENS_PER_CHUNK} tokens every "
        f"{GAP_S * 1e3:g} ms), {TRUTH_CONCURRENCY} streams, median of {runs}; load {min(loads):.1f}-{max(loads):.1f}"
    )
    ours, theirs = med("specdec", "ttft_excess_ms"), med("vllm", "ttft_excess_ms")
    ttft = make_row(f"loadgen TTFT minus the server's own ({setup})", ours, "ms",
                    goal="<= vllm bench serve client's", passed=ours <= theirs,
                    reference="vllm.benchmarks.serve client, same stand-in", reference_value=theirs)
    ttft["send_receive_ms"] = {
        tool: [round(med(tool, "send_ms"), 3), round(med(tool, "receive_ms"), 3)] for tool in data
    }
    ours, theirs = med("specdec", "tpot_ratio"), med("vllm", "tpot_ratio")
    tpot = make_row(f"loadgen TPOT / the server's own ({setup})", ours, "x",
                    goal=f"within {TPOT_TOLERANCE:.0%} of 1", passed=abs(ours - 1) <= TPOT_TOLERANCE,
                    reference="vllm.benchmarks.serve client, same stand-in", reference_value=theirs)
    return [ttft, tpot]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.perf.loadgen_truth")
    sub = parser.add_subparsers(dest="cmd", required=True)
    serve = sub.add_parser("serve", help="run the paced stand-in; prints its port")
    serve.add_argument("--cores", default="")
    clients = sub.add_parser("clients", help="alternate both clients against the stand-in")
    clients.add_argument("--base-url", required=True)
    clients.add_argument("--tokenizer", required=True)
    clients.add_argument("--runs", type=int, required=True)
    clients.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.cmd == "serve":
        asyncio.run(_serve({int(c) for c in args.cores.split(",") if c}))
        return 0
    args.out.write_text(json.dumps(_clients(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
