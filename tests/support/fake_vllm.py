"""A stand-in for vLLM's OpenAI server, run as a real process on loopback, for
bench-runner tests that must not pay a real model's start-up.

`python -m tests.support.fake_vllm --port P [--speculative-config JSON]`:
/health answers 200; /v1/completions streams SSE chunks carrying several tokens
each, with cumulative usage; /metrics exports vLLM's spec-decode counters, which
move only when a speculative config was given (k per-position series, k draft
tokens per draft), like the real engine.
"""

from __future__ import annotations

import argparse
import asyncio
import json

import orjson

TOKENS_PER_CHUNK = 3


class Fake:
    def __init__(self, k: int) -> None:
        self.k = k
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
                elif path == "/metrics":
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
            await asyncio.sleep(0.002)
            sent += n
            # Greedy and deterministic: the same prompt gets the same text in every cell.
            piece = "".join(f" w{(len(req['prompt']) + sent - n + i) % 97}" for i in range(n))
            chunk = {"choices": [{"index": 0, "text": piece, "finish_reason": "length" if sent == budget else None}],
                     "usage": {"prompt_tokens": 7, "completion_tokens": sent}}
            data = b"data: " + orjson.dumps(chunk) + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()
        tail = b"data: " + orjson.dumps({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": sent}}) + b"\n\ndata: [DONE]\n\n"
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


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--speculative-config", default="")
    args, _ = parser.parse_known_args()
    k = int(json.loads(args.speculative_config)["num_speculative_tokens"]) if args.speculative_config else 0
    server = await asyncio.start_server(Fake(k).connection, "127.0.0.1", args.port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
