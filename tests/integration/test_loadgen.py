"""The load generator against a real local SSE server (asyncio.start_server on 127.0.0.1).

The server speaks just enough HTTP/1.1 (keep-alive, chunked transfer) to stream
vLLM-shaped chunks: each carries several tokens and the cumulative usage, like
vLLM under speculation with `continuous_usage_stats`. It answers 500 to prompts
containing FAIL, counts requests in flight, and exports spec-decode counters on
/metrics that grow with every chunk it streams.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest

from services.bench.loadgen.loadgen import LoadGenerator, WindowSpec
from services.bench.loadgen.prompts import ChatTurn, Prompt
from services.bench.metrics import spec_decode_delta
from services.bench.results import build_result

TOKENS_PER_CHUNK = 3
FIRST_DELAY_S = 0.05
GAP_S = 0.02
K = 3  # the "server's" num_speculative_tokens: one draft of K tokens per chunk after the first


class SSEServer:
    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.generations = 0
        self.drafts = 0
        self.accepted = 0
        self.server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        assert self.server is not None, "serving: the fixture started it"
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head.decode().split("\r\n")
                method, path, _ = request_line.split(" ")
                headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if method == "GET" and path == "/metrics":
                    self._plain(writer, 200, self._metrics().encode(), "text/plain; version=0.0.4")
                elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
                    await self._generate(writer, orjson.loads(body), chat=path.endswith("chat/completions"))
                else:
                    self._plain(writer, 404, b"not found", "text/plain")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client closed its connection: the normal end of a keep-alive connection
        finally:
            writer.close()

    def _plain(self, writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str) -> None:
        reason = {200: "OK", 404: "Not Found", 500: "Internal Server Error"}[status]
        header = f"HTTP/1.1 {status} {reason}\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n\r\n"
        writer.write(header.encode() + body)

    async def _generate(self, writer: asyncio.StreamWriter, req: dict, *, chat: bool) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            text = req["messages"][-1]["content"] if chat else req["prompt"]
            if "FAIL" in text:
                await asyncio.sleep(0.01)
                self._plain(writer, 500, b'{"error": "injected failure"}', "application/json")
                return
            self.generations += 1
            budget = req["max_completion_tokens"] if chat else req["max_tokens"]
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            async for event in self._events(budget, chat):
                writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
        finally:
            self.in_flight -= 1

    async def _events(self, budget: int, chat: bool) -> AsyncIterator[bytes]:
        def sse(obj) -> bytes:
            return b"data: " + orjson.dumps(obj) + b"\n\n"

        if chat:
            yield sse({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
                       "usage": {"prompt_tokens": 7, "completion_tokens": 0}})
        sent = 0
        await asyncio.sleep(FIRST_DELAY_S)
        while sent < budget:
            n = min(TOKENS_PER_CHUNK, budget - sent)
            if sent:
                self.drafts += 1
                self.accepted += n - 1
                await asyncio.sleep(GAP_S)
            sent += n
            piece = "".join(f" t{sent - n + i}" for i in range(n))
            choice = {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
            choice["finish_reason"] = "length" if sent == budget else None
            yield sse({"choices": [choice], "usage": {"prompt_tokens": 7, "completion_tokens": sent}})
        yield sse({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": sent}}) + b"data: [DONE]\n\n"

    def _metrics(self) -> str:
        lines = ["# TYPE vllm:spec_decode_num_drafts counter",
                 f'vllm:spec_decode_num_drafts_total{{engine="0"}} {float(self.drafts)}',
                 "# TYPE vllm:spec_decode_num_draft_tokens counter",
                 f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {float(self.drafts * K)}',
                 "# TYPE vllm:spec_decode_num_accepted_tokens counter",
                 f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {float(self.accepted)}',
                 "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter"]
        lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="{p}"}} '
                  f"{float(self.drafts if p < TOKENS_PER_CHUNK - 1 else 0)}" for p in range(K)]
        return "\n".join(lines) + "\n"


@pytest.fixture
async def server() -> AsyncIterator[SSEServer]:
    srv = SSEServer()
    srv.server = await asyncio.start_server(srv._connection, "127.0.0.1", 0)
    try:
        yield srv
    finally:
        srv.server.close()
        await srv.server.wait_closed()


def prompt(i: int, *, fail: bool = False, max_tokens: int = 12) -> Prompt:
    text = f"{'FAIL ' if fail else ''}prompt {i}"
    return Prompt(prompt_id=f"p{i}", messages=[ChatTurn(role="user", content=text)], text=text, input_tokens=3,
                  max_output_tokens=max_tokens, ignore_eos=True)


async def test_completions_window_counts_timing_failures_and_cap(server: SSEServer):
    prompts = [prompt(i, fail=i in (2, 7)) for i in range(10)]
    spec = WindowSpec(base_url=server.base_url, model="toy", max_concurrency=3, warmup_requests=2)
    window = await LoadGenerator(spec).run_window(prompts)

    # Concurrency: the server never saw more than the cap, and the cap was reached.
    assert server.peak == 3 and window.max_in_flight == 3
    # Warm-up reached the server but is in no figure.
    assert server.generations == 2 + 8 and len(window.requests) == 10
    summary = window.summary()
    assert (summary.completed, summary.failed) == (8, 2)
    assert summary.failures_by_kind == {"http_500": 2}
    assert [r.status_code for r in window.requests if not r.ok] == [500, 500]

    for r in (r for r in window.requests if r.ok):
        assert r.chunk_tokens == [3, 3, 3, 3] and r.output_tokens == 12 and r.prompt_tokens == 7
        assert r.text == "".join(f" t{i}" for i in range(12))
        ttft = r.chunk_arrival_s[0] - r.start_s
        e2el = r.chunk_arrival_s[-1] - r.start_s
        assert ttft >= FIRST_DELAY_S
        # Three paced gaps separate the first and last chunks; a busy loop can deliver the
        # first one late, hence the 20 % allowance below the paced time.
        assert e2el - ttft >= 0.8 * 3 * GAP_S
    # TPOT is (E2EL - TTFT) / (12 - 1): about 3 gaps over 11 tokens (5.5 ms), where one
    # gap per chunk would give 20 ms; the bounds leave room for a loaded machine.
    expected_tpot_ms = 3 * GAP_S / 11 * 1e3
    assert summary.tpot.median_ms is not None and summary.itl.median_ms is not None
    assert 0.8 * expected_tpot_ms <= summary.tpot.median_ms < 2 * expected_tpot_ms
    assert summary.itl.median_ms >= 0.8 * GAP_S * 1e3 and summary.total_output_tokens == 96

    # /metrics around the window: the deltas count the measured window only (warm-up excluded).
    delta = spec_decode_delta(window.metrics_before, window.metrics_after)
    assert delta is not None
    assert delta.num_drafts == 8 * 3 and delta.num_draft_tokens == 8 * 3 * K
    assert delta.accepted_per_position == [24, 24, 0] and delta.mean_acceptance_length == pytest.approx(3.0)

    result = build_result(window, spec_decode=delta)
    assert result["completed"] == 8 and result["failed"] == 2 and result["output_lens"].count(12) == 8
    assert result["median_tpot_ms"] == pytest.approx(summary.tpot.median_ms)


async def test_chat_stream_and_refused_connection(server: SSEServer):
    spec = WindowSpec(base_url=server.base_url, endpoint="/v1/chat/completions", model="toy", max_concurrency=2)
    window = await LoadGenerator(spec).run_window([prompt(i, max_tokens=7) for i in range(4)])
    assert all(r.ok for r in window.requests)
    assert {tuple(r.chunk_tokens or ()) for r in window.requests} == {(3, 3, 1)}  # the role chunk carries no token
    assert window.summary().total_output_tokens == 28

    # Nothing listens on a closed port: every request is a "connect" failure, the window still returns.
    port = int(server.base_url.rsplit(":", 1)[1])
    assert server.server is not None
    server.server.close()
    await server.server.wait_closed()
    dead = WindowSpec(base_url=f"http://127.0.0.1:{port}", model="toy", connect_timeout_s=2.0)
    window = await LoadGenerator(dead).run_window([prompt(0), prompt(1)])
    assert [r.error_kind for r in window.requests] == ["connect", "connect"]
    assert window.metrics_before is None and window.metrics_error


async def test_idle_connections_closed_by_the_server_and_streams_dropped_midway():
    """Keep-alive connections the server closes while idle are replaced (the request goes again, once);
    a stream cut mid-body is a `transport` failure."""
    connections = 0
    body = (b"data: " + orjson.dumps({"choices": [{"index": 0, "text": " a", "finish_reason": "length"}],
                                      "usage": {"prompt_tokens": 3, "completion_tokens": 1}}) + b"\n\ndata: [DONE]\n\n")

    async def close_after_each(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        head = await reader.readuntil(b"\r\n\r\n")
        length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")),
                      0)
        request = orjson.loads(await reader.readexactly(length)) if length else None
        if request is None:  # GET /metrics
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nx 1")
        elif "DROP" in request["prompt"]:
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
            writer.write(b"%x\r\n%s\r\n" % (len(body) // 2, body[: len(body) // 2]))  # half the events, no end
        else:
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"
                         % (len(body), body))
        await writer.drain()
        await asyncio.sleep(0.05)  # the client has the whole response, then the idle connection goes
        writer.close()

    srv = await asyncio.start_server(close_after_each, "127.0.0.1", 0)
    try:
        host, port = srv.sockets[0].getsockname()[:2]
        spec = WindowSpec(base_url=f"http://{host}:{port}", model="toy", max_concurrency=1)
        drop = Prompt(prompt_id="drop", messages=[ChatTurn(role="user", content="DROP")],
                      text="DROP", input_tokens=1, max_output_tokens=1, ignore_eos=True)
        prompts = [prompt(0), prompt(1), drop, prompt(3)]
        window = await LoadGenerator(spec, sleep=asyncio.sleep).run_window(prompts)
    finally:
        srv.close()
        await srv.wait_closed()
    kinds = [r.error_kind for r in window.requests]
    assert kinds == [None, None, "transport", None], [r.error for r in window.requests]
    assert connections == 6  # two scrapes, four requests: each found its previous connection gone
    assert window.metrics_before == window.metrics_after == "x 1"


async def test_two_client_processes_make_one_window_on_one_clock(server: SSEServer):
    """client_processes=2: two child processes share the cap, the warm-up and one start; the merged
    record reads like one process's, every timestamp on the parent's CLOCK_MONOTONIC."""
    import time

    prompts = [prompt(i, fail=i == 5) for i in range(12)]
    from services.bench.loadgen.loadgen_procs import drive_window

    spec = WindowSpec(base_url=server.base_url, model="toy", max_concurrency=4, warmup_requests=3, client_processes=2)
    with pytest.raises(ValueError, match="drive_window"):
        await LoadGenerator(spec).run_window(prompts)  # one generator never starts processes behind its caller
    before = time.monotonic()
    window = await drive_window(spec, prompts)
    after = time.monotonic()

    assert [r.index for r in window.requests] == list(range(12))
    assert [r.prompt_id for r in window.requests] == [p.prompt_id for p in prompts]
    assert server.generations == 3 + 11 and (window.warmup_completed, window.warmup_failed) == (3, 0)
    assert server.peak <= 4 and 2 <= window.max_in_flight <= 4
    summary = window.summary()
    assert (summary.completed, summary.failed) == (11, 1) and summary.failures_by_kind == {"http_500": 1}
    # One clock: every record's timestamps lie inside the parent's own before/after readings, and the
    # two processes' requests (even and odd positions) started together, within one request's time.
    for r in window.requests:
        assert r.end_s is not None, r
        assert before < r.scheduled_s <= r.start_s <= (r.chunk_arrival_s or [r.start_s])[0] <= r.end_s < after
    first = {p: min(r.start_s for r in window.requests if r.index % 2 == p) for p in (0, 1)}
    assert abs(first[0] - first[1]) < FIRST_DELAY_S
    last_end = max(r.end_s for r in window.requests if r.end_s is not None)
    assert window.duration_s == pytest.approx(last_end - min(first.values()), abs=0.25)
    # The scrapes are the parent's, around the whole window: its counters cover both processes' requests.
    delta = spec_decode_delta(window.metrics_before, window.metrics_after)
    assert delta is not None and delta.num_drafts == 11 * 3
    assert build_result(window, spec_decode=delta)["completed"] == 11
