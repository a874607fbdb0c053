"""The load generator against a fake HTTP layer (the `pool` seam), with a scripted clock for the timing logic.

The real HTTP/1.1 client is tested in test_bench_http1.py and, against a real
server, in tests/integration/test_loadgen.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from services.bench.errors import PromptError
from services.bench.loadgen.http1 import ConnectError, ConnectTimeout, Response
from services.bench.loadgen.loadgen import LoadGenerator, WindowSpec, run_levels
from services.bench.loadgen.prompts import ChatTurn, Prompt

BASE = "http://bench.test"


class Clock:
    """Clock stand-in: the scripted stream sets `now` before each part it delivers."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# A handler gets (method, path, parsed body or None, sink) and returns a Response.
Handler = Callable[[str, str, dict | None, Callable[[bytes, float], bool] | None], Awaitable[Response]]


class FakePool:
    """The generator's HTTP layer stand-in: requests are (method, path, body) tuples."""

    def __init__(self, handler: Handler, clock) -> None:
        self.handler, self.clock = handler, clock

    def request_bytes(self, method, path, body, headers=None):
        return method, path, body

    async def send(self, request, sink=None, *, max_body=1 << 20):
        method, path, body = request
        return await self.handler(method, path, orjson.loads(body) if body else None, sink)

    async def aclose(self) -> None:
        return None


def scripted(clock: Clock | None, parts: list[tuple[float | None, bytes]], status: int = 200):
    """A handler body: deliver `parts` to the sink, each at its scripted time."""

    async def deliver(sink) -> Response:
        for at, data in parts:
            if at is not None and clock is not None:
                clock.now = at
            if sink(data, clock() if clock is not None else time.monotonic()):  # the generator's default clock
                break
        return Response(status, b"")

    return deliver


def sse(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else orjson.dumps(obj)) + b"\n\n"


def comp(text: str, cumulative: int | None, *, finish=None, prompt=5, ids=None) -> dict:
    choice = {"index": 0, "text": text, "finish_reason": finish}
    if ids is not None:
        choice["token_ids"] = ids
    chunk: dict[str, Any] = {"id": "c", "object": "text_completion", "choices": [choice]}
    if cumulative is not None:
        chunk["usage"] = {"prompt_tokens": prompt, "completion_tokens": cumulative, "total_tokens": prompt + cumulative}
    return chunk


def usage(total: int, prompt: int = 5) -> dict:
    return {"id": "c", "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": total}}


def prompt(i: int = 0, *, max_tokens: int = 8, ignore_eos: bool = False) -> Prompt:
    return Prompt(prompt_id=f"p{i}", messages=[ChatTurn(role="user", content=f"q{i}")], text=f"q{i}",
                  input_tokens=4, max_output_tokens=max_tokens, ignore_eos=ignore_eos)


def spec(**kw) -> WindowSpec:
    return WindowSpec(base_url=BASE, model="toy", **kw)


def fake(stream_for, metrics: list[str] | None = None, seen=None):
    """A pool factory: /metrics answers the next of `metrics`; other requests go to stream_for(body)(sink)."""
    scrapes = iter(metrics or [])

    def factory(spec, clock):
        async def handler(method, path, body, sink):
            if path == "/metrics":
                return Response(200, next(scrapes, "").encode())
            if seen is not None:
                seen.append(body)
            return await stream_for(body)(sink)

        return FakePool(handler, clock)

    return factory


async def one_window(parts, *, clock: Clock, endpoint="/v1/completions", **kw):
    gen = LoadGenerator(spec(endpoint=endpoint, **kw), clock=clock, pool=fake(lambda b: scripted(clock, parts)))
    return await gen.run_window([prompt()])


async def test_multi_token_chunks_are_counted_from_usage():
    clock = Clock(100.0)
    parts = [
        (100.25, sse(comp("a b c", 3))),
        (100.30, sse(comp("d e", 5))),
        (100.45, sse(comp("f g h", 8, finish="length"))),
        (100.46, sse(usage(8)) + b"data: [DONE]\n\n"),
    ]
    window = await one_window(parts, clock=clock)
    (r,) = window.requests
    assert r.ok, r.error
    assert r.chunk_tokens == [3, 2, 3]
    assert r.chunk_arrival_s == pytest.approx([100.25, 100.30, 100.45])
    assert r.output_tokens == 8 and r.prompt_tokens == 5
    assert r.text == "a b cd ef g h" and r.finish_reason == "length"
    s = window.summary()
    assert s.ttft.median_ms == pytest.approx(250.0)
    assert s.e2el.median_ms == pytest.approx(450.0)  # the usage chunk and [DONE] do not extend it
    assert s.tpot.median_ms == pytest.approx(200.0 / 7)  # 8 tokens, not 3 chunks
    assert s.itl.count == 2


async def test_events_split_across_reads_and_crlf():
    clock = Clock(0.0)
    whole = sse(comp("x", 2)).replace(b"\n", b"\r\n")
    parts = [
        (0.1, whole[:9]),
        (0.2, whole[9:-1]),
        (0.3, whole[-1:] + sse(comp("y", 3))),
        (0.4, sse(usage(3)) + b"data: [DONE]\n\n"),
    ]
    (r,) = (await one_window(parts, clock=clock)).requests
    assert r.ok, r.error
    # The first event completes only with the last byte of its blank line, at 0.3, together with the second.
    assert r.chunk_arrival_s == pytest.approx([0.3, 0.3])
    assert r.chunk_tokens == [2, 1]


async def test_token_ids_count_when_usage_is_per_request_only():
    clock = Clock(0.0)
    parts = [(0.1, sse(comp("ab", None, ids=[1, 2]))), (0.2, sse(comp("cde", None, ids=[3, 4, 5]))),
             (0.3, sse(usage(5)) + b"data: [DONE]\n\n")]
    (r,) = (await one_window(parts, clock=clock, return_token_ids=True)).requests
    assert r.ok and r.chunk_tokens == [2, 3] and r.output_tokens == 5


async def test_total_only_usage_leaves_chunk_counts_unknown():
    clock = Clock(0.0)
    parts = [(0.1, sse(comp("ab", None))), (0.2, sse(comp("cde", None))), (0.3, sse(usage(6)) + b"data: [DONE]\n\n")]
    (r,) = (await one_window(parts, clock=clock)).requests
    assert r.ok and r.chunk_tokens is None and r.output_tokens == 6
    assert len(r.chunk_arrival_s) == 2


async def test_no_token_counts_at_all_is_a_failure_not_a_guess():
    clock = Clock(0.0)
    parts = [(0.1, sse(comp("ab", None))), (0.2, b"data: [DONE]\n\n")]
    (r,) = (await one_window(parts, clock=clock)).requests
    assert r.error_kind == "no_token_counts" and r.output_tokens is None


async def test_chat_role_chunk_is_not_a_token():
    clock = Clock(0.0)

    def chat(delta, cumulative):
        return {"id": "c", "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                "usage": {"prompt_tokens": 9, "completion_tokens": cumulative}}

    seen: list[dict] = []
    parts = [(0.05, sse(chat({"role": "assistant", "content": ""}, 0))), (0.2, sse(chat({"content": "hi there"}, 2))),
             (0.3, sse(chat({"content": "!"}, 4))), (0.31, sse(usage(4, prompt=9)) + b"data: [DONE]\n\n")]
    gen = LoadGenerator(spec(endpoint="/v1/chat/completions"), clock=clock,
                        pool=fake(lambda b: scripted(clock, parts), seen=seen))
    (r,) = (await gen.run_window([prompt(max_tokens=4, ignore_eos=True)])).requests
    assert r.ok and r.chunk_arrival_s == pytest.approx([0.2, 0.3]) and r.chunk_tokens == [2, 2]
    assert r.text == "hi there!" and r.prompt_tokens == 9
    body = seen[0]
    assert body["messages"] == [{"role": "user", "content": "q0"}]
    assert body["max_completion_tokens"] == 4 and body["ignore_eos"] is True
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}


async def test_completions_body():
    seen: list[dict] = []
    clock = Clock(0.0)
    parts = [(0.1, sse(comp("a", 1)) + sse(usage(1)) + b"data: [DONE]\n\n")]
    gen = LoadGenerator(spec(temperature=0.0, extra_body={"top_p": 0.5}), clock=clock,
                        pool=fake(lambda b: scripted(clock, parts), seen=seen))
    await gen.run_window([prompt(max_tokens=3)])
    body = seen[0]
    assert body["prompt"] == "q0" and body["max_tokens"] == 3 and body["model"] == "toy"
    assert body["temperature"] == 0.0 and body["top_p"] == 0.5
    assert "ignore_eos" not in body and "messages" not in body


@pytest.mark.parametrize(
    ("parts", "kind"),
    [
        ([(0.1, sse(comp("a", 1)))], "stream"),  # no [DONE]
        ([(0.1, b"data: {not json\n\n")], "stream"),
        ([(0.1, sse(comp("a", 1)) + sse({"error": {"message": "engine dead"}}) + b"data: [DONE]\n\n")], "server_error"),
        ([(0.1, sse(usage(0)) + b"data: [DONE]\n\n")], "no_tokens"),
        ([(0.1, sse(comp("a", 3)) + sse(comp("b", 2)) + b"data: [DONE]\n\n")], "stream"),  # usage went backwards
    ],
)
async def test_malformed_streams_are_failures(parts, kind):
    (r,) = (await one_window(parts, clock=Clock(0.0))).requests
    assert r.error_kind == kind and r.error and not r.ok


async def test_http_and_transport_failures_are_data():
    ok = scripted(None, [(None, sse(comp("a", 1)) + sse(usage(1)) + b"data: [DONE]\n\n")])

    async def handler(method, path, body, sink):
        if path == "/metrics":
            return Response(404, b"")
        n = int(body["prompt"][1:])
        if n == 0:
            return Response(500, b"engine overloaded")
        if n == 1:
            raise ConnectError("refused")
        if n == 2:
            raise ConnectTimeout("slow")
        return await ok(sink)

    gen = LoadGenerator(spec(), pool=lambda s, c: FakePool(handler, c))
    window = await gen.run_window([prompt(i) for i in range(4)])
    kinds = [r.error_kind for r in window.requests]
    assert kinds == ["http_500", "connect", "timeout", None]
    assert window.requests[0].status_code == 500 and "engine overloaded" in window.requests[0].error
    s = window.summary()
    assert (s.completed, s.failed) == (1, 3)
    assert window.metrics_before is None and "404" in window.metrics_error


async def test_request_deadline_is_a_timeout_record():
    def stall(body):
        async def deliver(sink):
            sink(sse(comp("a", 1)), time.monotonic())
            await asyncio.sleep(5)
            sink(b"data: [DONE]\n\n", time.monotonic())
            return Response(200, b"")

        return deliver

    gen = LoadGenerator(spec(request_timeout_s=0.05), pool=fake(stall))
    (r,) = (await gen.run_window([prompt()])).requests
    assert r.error_kind == "timeout"


class Paced:
    """A real-time stream that counts how many streams are open at once."""

    live = 0
    peak = 0

    def __init__(self, body) -> None:
        pass

    async def __call__(self, sink) -> Response:
        Paced.live += 1
        Paced.peak = max(Paced.peak, Paced.live)
        try:
            await asyncio.sleep(0.01)
            sink(sse(comp("a", 2)) + sse(usage(2)) + b"data: [DONE]\n\n", time.monotonic())
            return Response(200, b"")
        finally:
            Paced.live -= 1


async def test_concurrency_cap_warmup_and_scrapes():
    Paced.live = Paced.peak = 0
    seen: list[dict] = []
    metrics = ["before 1\n", "after 2\n"]
    gen = LoadGenerator(spec(max_concurrency=3, warmup_requests=5),
                        pool=fake(Paced, metrics=metrics, seen=seen))
    window = await gen.run_window([prompt(i) for i in range(12)])
    assert Paced.peak == 3 and window.max_in_flight == 3
    assert len(seen) == 17  # 5 warm-up + 12 measured requests reached the server
    assert len(window.requests) == 12 and [r.index for r in window.requests] == list(range(12))
    assert (window.warmup_completed, window.warmup_failed) == (5, 0)
    assert window.metrics_before == "before 1\n" and window.metrics_after == "after 2\n"
    assert window.summary().completed == 12


async def test_run_levels_one_window_per_level():
    Paced.live = Paced.peak = 0
    windows = await run_levels(spec(), [prompt(i) for i in range(6)], [1, 4],
                               pool=fake(Paced))
    assert [w.spec.max_concurrency for w in windows] == [1, 4]
    assert [w.max_in_flight for w in windows] == [1, 4]


async def test_constant_arrivals_follow_the_schedule():
    clock = Clock(0.0)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    body = sse(comp("a", 1)) + sse(usage(1)) + b"data: [DONE]\n\n"
    gen = LoadGenerator(spec(arrival="constant", request_rate_per_s=4.0), clock=clock, sleep=sleep,
                        pool=fake(lambda b: scripted(None, [(None, body)])))
    window = await gen.run_window([prompt(i) for i in range(4)])
    assert [r.scheduled_s for r in window.requests] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert sum(slept) == pytest.approx(1.0)


def test_spec_refuses_inert_settings():
    with pytest.raises(ValidationError, match="arrival inf"):
        spec(request_rate_per_s=5.0)
    with pytest.raises(ValidationError, match="needs request_rate_per_s"):
        spec(arrival="poisson")
    with pytest.raises(ValidationError, match="burstiness applies"):
        spec(arrival="constant", request_rate_per_s=2.0, burstiness=0.5)
    with pytest.raises(ValidationError, match="extra_body may not set"):
        spec(extra_body={"stream": False})
    with pytest.raises(ValidationError):
        WindowSpec(base_url="bench.test:80", model="m")


async def test_run_levels_validates_each_level_and_empty_windows():
    with pytest.raises(ValidationError):
        await run_levels(spec(), [prompt()], [0])

    with pytest.raises(PromptError):
        await LoadGenerator(spec()).run_window([])


def test_client_processes_split_the_cap_and_warmup_and_refuse_a_cap_too_small():
    from services.bench.loadgen.loadgen_procs import child_specs, max_overlap, shares

    assert shares(10, 3) == [4, 3, 3] and shares(2, 4) == [1, 1, 0, 0]
    children = child_specs(spec(max_concurrency=5, warmup_requests=3, client_processes=2))
    assert [(c.max_concurrency, c.warmup_requests, c.client_processes) for c in children] == [(3, 2, 1), (2, 1, 1)]
    assert [c.max_concurrency for c in child_specs(spec(client_processes=3))] == [None, None, None]
    with pytest.raises(ValidationError, match="cannot be split"):
        spec(max_concurrency=1, client_processes=2)

    def rec(i, start, end):
        from services.bench.loadgen.timing import RequestRecord

        return RequestRecord(index=i, prompt_id=f"p{i}", scheduled_s=start, start_s=start, end_s=end,
                             chunk_arrival_s=[end], chunk_tokens=[1], output_tokens=1, prompt_tokens=1,
                             status_code=200, error_kind=None, error=None, finish_reason="length", text="a")

    # [0,2) [1,3) [2,4): at most two at once (an end and a start at the same instant do not overlap).
    assert max_overlap([rec(0, 0.0, 2.0), rec(1, 1.0, 3.0), rec(2, 2.0, 4.0)]) == 2
