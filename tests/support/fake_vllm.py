"""A stand-in for vLLM's OpenAI server, run as a real process on loopback, for
bench-runner tests that must not pay a real model's start-up.

`python -m tests.support.fake_vllm --port P [--model M] [--max-model-len N]
[--enforce-eager] [--dtype D] [--max-num-seqs N] [--tensor-parallel-size N]
[--quantization Q] [--max-num-batched-tokens N] [--kv-cache-dtype D] [--[no-]enable-prefix-caching]
[--speculative-config JSON] [--fake-no-drafts]`: at start it prints vLLM
0.32.0's `non-default args` and `Initializing a V1 LLM engine` lines for what
it was given (vLLM's defaults otherwise), which the bench-runner reads back;
/v1/models names the model and its max_model_len; /health answers 200; /v1/completions streams SSE chunks carrying
several tokens each, with cumulative usage; /metrics exports vLLM's spec-decode counters, which
move only when a speculative config was given (k per-position series, k draft
tokens per draft), like the real engine; `--fake-no-drafts` makes an engine
that logs its speculative config but never drafts (the counters' guard);
`--fake-token-ms MS --fake-trial-cv CV --fake-seed S` set its decode pace and
a seeded per-window noise on it (tests/support/fake_pacing.py); `--fake-lifetime-log PATH`
appends `start TIME` when it serves and `exit TIME` when SIGTERM ends it (time.time()),
so a test can tell whether two servers ever ran at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import time

import orjson

from tests.support.fake_pacing import Pace

TOKENS_PER_CHUNK = 3


class Fake:
    def __init__(self, k: int, models: dict | None = None, pace: Pace | None = None) -> None:
        self.k = k
        self.pace = pace or Pace()
        self.models = models or {"object": "list", "data": []}
        self.drafts = 0
        self.accepted = 0

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head.decode().split("\r\n")
                method, path, _ = request_line.split(" ")
                headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if path == "/health":
                    self.plain(writer, b"", "text/plain")
                elif path == "/v1/models":
                    self.plain(writer, orjson.dumps(self.models), "application/json")
                elif path == "/metrics":
                    self.pace.scraped()
                    self.plain(writer, self.metrics().encode(), "text/plain; version=0.0.4")
                elif method == "POST" and path == "/v1/completions":
                    await self.generate(writer, orjson.loads(body))
                else:
                    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def plain(self, writer: asyncio.StreamWriter, body: bytes, ctype: str) -> None:
        writer.write(f"HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body)

    async def generate(self, writer: asyncio.StreamWriter, req: dict) -> None:
        budget = int(req["max_tokens"])
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        sent = 0
        await asyncio.sleep(0.01)
        while sent < budget:
            n = min(TOKENS_PER_CHUNK if self.k else 1, budget - sent)
            if self.k and sent:
                self.drafts += 1
                self.accepted += n - 1
            await asyncio.sleep(self.pace.step())
            sent += n
            # Greedy and deterministic: the same prompt gets the same text in every cell.
            piece = "".join(f" w{(len(req['prompt']) + sent - n + i) % 97}" for i in range(n))
            chunk = {"choices": [{"index": 0, "text": piece, "finish_reason": "length" if sent == budget else None}],
                     "usage": {"prompt_tokens": 7, "completion_tokens": sent}}
            data = b"data: " + orjson.dumps(chunk) + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()
        tail = (
            b"data: "
            + orjson.dumps({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": sent}})
            + b"\n\ndata: [DONE]\n\n"
        )
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(tail), tail))

    def metrics(self) -> str:
        if not self.k:
            return "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0.0\n"
        lines = [
            f'vllm:spec_decode_num_drafts_total{{engine="0"}} {float(self.drafts)}',
            f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {float(self.drafts * self.k)}',
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {float(self.accepted)}',
        ]
        per = [self.drafts if p < TOKENS_PER_CHUNK - 1 else 0 for p in range(self.k)]
        lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="{p}"}} {float(v)}'
                  for p, v in enumerate(per)]
        return "\n".join(lines) + "\n"


# vLLM 0.32.0's defaults for what the fake is not given (its default model, and
# the dtype it resolves `auto` to for a float32 checkpoint on CPU).
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"
DEFAULT_MAX_MODEL_LEN = 40960


def startup_lines(args: argparse.Namespace, spec: dict | None) -> list[str]:
    """The two start-up lines the bench-runner reads back, in vLLM 0.32.0's format."""
    given = {key: value for key, value in (
        ("model", args.model), ("dtype", args.dtype), ("max_model_len", args.max_model_len),
        ("quantization", args.quantization), ("tensor_parallel_size", args.tensor_parallel_size),
        ("enforce_eager", args.enforce_eager or None), ("max_num_seqs", args.max_num_seqs),
        ("max_num_batched_tokens", args.max_num_batched_tokens), ("enable_prefix_caching", args.enable_prefix_caching),
        ("kv_cache_dtype", args.kv_cache_dtype), ("speculative_config", spec)) if value is not None}
    resolved = {None: "bfloat16", "auto": "bfloat16", "half": "float16", "float": "float32"}
    dtype = f"torch.{resolved.get(args.dtype, args.dtype)}"
    model = args.model or DEFAULT_MODEL
    speculative = "None"
    if spec is not None:
        draft = None if spec["method"] in ("ngram", "suffix") else spec.get("model", model)
        speculative = (f"SpeculativeConfig(method={spec['method']!r}, model={draft!r}, "
                       f"num_spec_tokens={spec['num_speculative_tokens']})")
    config = (f"model={model!r}, speculative_config={speculative}, tokenizer={model!r}, skip_tokenizer_init=False, "
              f"dtype={dtype}, max_seq_len={args.max_model_len or DEFAULT_MAX_MODEL_LEN}, download_dir=None, "
              f"load_format=auto, tensor_parallel_size={args.tensor_parallel_size or 1}, pipeline_parallel_size=1, "
              f"data_parallel_size=1, quantization={args.quantization or None}, quantization_config=None, "
              f"enforce_eager={args.enforce_eager}, kv_cache_dtype={args.kv_cache_dtype or 'auto'}, device_config=cpu, "
              f"seed=0, served_model_name={model}, enable_prefix_caching={args.enable_prefix_caching is not False}, "
              f"enable_chunked_prefill=True, compilation_config={{'mode': <CompilationMode.NONE: 0>}}")
    engine = ("(EngineCore pid=2) INFO 12-01 00:00:01 [core.py:133] Initializing a V1 LLM engine (v0.32.0) "
              f"with config: {config}")
    return [f"(APIServer pid=1) INFO 12-01 00:00:00 [api_utils.py:286] non-default args: {given!r}", engine]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--speculative-config", default="")
    parser.add_argument("--model")
    parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--enforce-eager", action="store_true")
    parser.add_argument("--dtype")
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--tensor-parallel-size", type=int)
    parser.add_argument("--quantization")
    parser.add_argument("--max-num-batched-tokens", type=int)
    parser.add_argument("--kv-cache-dtype")
    parser.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction)
    parser.add_argument("--fake-no-drafts", action="store_true")
    parser.add_argument("--fake-lifetime-log")
    Pace.add_arguments(parser)
    args, _ = parser.parse_known_args()
    spec = json.loads(args.speculative_config) if args.speculative_config else None
    k = int(spec["num_speculative_tokens"]) if spec and not args.fake_no_drafts else 0
    for line in startup_lines(args, spec):
        print(line, flush=True)
    model = args.model or DEFAULT_MODEL
    models = {"object": "list", "data": [{"id": model, "object": "model", "root": model,
                                          "max_model_len": args.max_model_len or DEFAULT_MAX_MODEL_LEN}]}
    server = await asyncio.start_server(Fake(k, models, Pace.from_args(args)).connection, "127.0.0.1", args.port)
    if args.fake_lifetime_log:
        _lifetime(args.fake_lifetime_log, "start")
        # The exit is written before the process ends: a server still alive after it is ending already.
        def on_sigterm() -> None:
            _lifetime(args.fake_lifetime_log, "exit")
            server.close()

        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_sigterm)
    async with server:
        try:
            await server.serve_forever()
        except asyncio.CancelledError:
            pass


def _lifetime(path: str, word: str) -> None:
    with open(path, "a", encoding="ascii") as log:
        log.write(f"{word} {time.time():.6f}\n")


if __name__ == "__main__":
    asyncio.run(main())
