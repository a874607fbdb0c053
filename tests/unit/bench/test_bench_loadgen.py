"""The load generator against httpx.MockTransport, with a scripted clock for the timing logic."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import orjson
import pytest
from pydantic import ValidationError

from services.bench.errors import PromptError
from services.bench.loadgen import LoadGenerator, WindowSpec, run_levels
from services.bench.prompts import ChatTurn, Prompt

BASE = "http://bench.test"


class Clock:
    """perf_counter stand-in: the scripted stream sets `now` before each part it yields."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Scripted(httpx.AsyncByteStream):
    def __init__(self, clock: Clock | None, parts: list[tuple[float | None, bytes]]) -> None:
        self.clock, self.parts = clock, parts

    async def __aiter__(self):
        for at, data in self.parts:
            if at is not None and self.clock is not None:
                self.clock.now = at
            yield data


def sse(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else orjson.dumps(obj)) + b"\n\n"


def comp(text: str, cumulative: int | None, *, finish=None, prompt=5, ids=None) -> dict:
    choice = {"index": 0, "text": text, "finish_reason": finish}
    if ids is not None:
        choice["token_ids"] = ids
    chunk = {"id": "c", "object": "text_completion", "choices": [choice]}
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


def transport(stream_for: Callable[[httpx.Request], httpx.Response], metrics: list[str] | None = None, seen=None):
    scrapes = iter(metrics or [])

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(200, text=next(scrapes, ""))
        if seen is not None:
            seen.append(orjson.loads(request.content))
        return stream_for(request)

    return httpx.MockTransport(handler)


async def one_window(parts, *, clock: Clock, endpoint="/v1/completions", **kw):
    gen = LoadGenerator(spec(endpoint=endpoint, **kw), clock=clock,
                        transport=transport(lambda r: httpx.Response(200, stream=Scripted(clock, parts))))
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
    parts = [(0.1, whole[:9]), (0.2, whole[9:-1]), (0.3, whole[-1:] + sse(comp("y", 3))), (0.4, sse(usage(3)) + b"data: [DONE]\n\n")]
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
                        transport=transport(lambda r: httpx.Response(200, stream=Scripted(clock, parts)), seen=seen))
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
                        transport=transport(lambda r: httpx.Response(200, stream=Scripted(clock, parts)), seen=seen))
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
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(404)
        n = int(orjson.loads(request.content)["prompt"][1:])
        if n == 0:
            return httpx.Response(500, text="engine overloaded")
        if n == 1:
            raise httpx.ConnectError("refused", request=request)
        if n == 2:
            raise httpx.ReadTimeout("slow", request=request)
        return httpx.Response(200, stream=Scripted(None, [(None, sse(comp("a", 1)) + sse(usage(1)) + b"data: [DONE]\n\n")]))

    gen = LoadGenerator(spec(), transport=httpx.MockTransport(handler))
    window = await gen.run_window([prompt(i) for i in range(4)])
    kinds = [r.error_kind for r in window.requests]
    assert kinds == ["http_500", "connect", "timeout", None]
    assert window.requests[0].status_code == 500 and "engine overloaded" in window.requests[0].error
    s = window.summary()
    assert (s.completed, s.failed) == (1, 3)
    assert window.metrics_before is None and "404" in window.metrics_error


async def test_request_deadline_is_a_timeout_record():
    class Stall(httpx.AsyncByteStream):
        async def __aiter__(self):
            yield sse(comp("a", 1))
            await asyncio.sleep(5)
            yield b"data: [DONE]\n\n"

    gen = LoadGenerator(spec(request_timeout_s=0.05), transport=transport(lambda r: httpx.Response(200, stream=Stall())))
    (r,) = (await gen.run_window([prompt()])).requests
    assert r.error_kind == "timeout"


class Paced(httpx.AsyncByteStream):
    """A real-time stream that counts how many streams are open at once."""

    live = 0
    peak = 0

    async def __aiter__(self):
        Paced.live += 1
        Paced.peak = max(Paced.peak, Paced.live)
        try:
            await asyncio.sleep(0.01)
            yield sse(comp("a", 2)) + sse(usage(2)) + b"data: [DONE]\n\n"
        finally:
            Paced.live -= 1


async def test_concurrency_cap_warmup_and_scrapes():
    Paced.live = Paced.peak = 0
    seen: list[dict] = []
    metrics = ["before 1\n", "after 2\n"]
    gen = LoadGenerator(spec(max_concurrency=3, warmup_requests=5),
                        transport=transport(lambda r: httpx.Response(200, stream=Paced()), metrics=metrics, seen=seen))
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
                               transport=transport(lambda r: httpx.Response(200, stream=Paced())))
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
                        transport=transport(lambda r: httpx.Response(200, stream=Scripted(None, [(None, body)]))))
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
