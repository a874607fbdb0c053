"""specdec's load generator: streaming OpenAI-API requests over HTTP/1.1 (http1.py), raw timestamps out.

One measured window is warm-up, a /metrics scrape, the requests on the arrival schedule under the
concurrency cap, and a second scrape (docs/bench-loadgen.md#what-a-measured-window-is). Nothing here
computes a latency (timing.py does); a chunk is never assumed to be one token, and a failed request is a
`RequestRecord` with its `error_kind`: a window never raises for a request."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Literal, Protocol

import numpy as np
import orjson
from pydantic import Field, model_validator

from contracts.envelope import Strict
from services.bench.errors import PromptError
from services.bench.loadgen.http1 import ConnectError, ConnectTimeout, Http1Pool, ProtocolError, Response, Sink
from services.bench.loadgen.prompts import Prompt, cycle
from services.bench.loadgen.sse import ERROR_BODY_CHARS, StreamState
from services.bench.loadgen.timing import RequestRecord, WindowSummary, arrival_offsets_s, summarize

Endpoint = Literal["/v1/completions", "/v1/chat/completions"]
Arrival = Literal["inf", "constant", "poisson"]
WINDOW_VERSION: Final = 1
# Request keys the load generator owns; extra_body may not replace them.
_OWNED_KEYS = frozenset(
    {"model", "prompt", "messages", "max_tokens", "max_completion_tokens", "stream", "stream_options"}
)
_HEADERS = {"content-type": "application/json", "accept": "text/event-stream"}
SCRAPE_TIMEOUT_S = 30.0


class WindowSpec(Strict):
    """How one window drives a served cell."""

    base_url: str = Field(pattern=r"^https?://", description="http://host:port of the served cell.")
    endpoint: Endpoint = Field(default="/v1/completions", description="Streaming endpoint the requests go to.")
    model: str = Field(min_length=1, description="`model` of every request: the served model name.")
    arrival: Arrival = Field(
        default="inf",
        description="inf: every request at once; constant: every 1/rate s; poisson: gamma gaps (burstiness).",
    )
    request_rate_per_s: float | None = Field(
        default=None, gt=0, description="Offered requests per second; None with arrival inf."
    )
    burstiness: float = Field(
        default=1.0, gt=0, description="Gamma shape of poisson gaps: 1 Poisson, < 1 burstier, > 1 more even."
    )
    max_concurrency: int | None = Field(default=None, ge=1, description="Requests in flight at most; None for no cap.")
    warmup_requests: int = Field(
        default=0, ge=0, description="Requests sent before the window and excluded from every figure."
    )
    temperature: float = Field(
        default=0.0, ge=0, description="Sampling temperature (0: greedy, needed by the agreement eval)."
    )
    request_timeout_s: float = Field(default=600.0, gt=0, description="Deadline of one request, send to last byte, s.")
    connect_timeout_s: float = Field(default=10.0, gt=0, description="Deadline of one connection attempt, s.")
    seed: int = Field(default=0, description="Seed of the arrival schedule.")
    return_token_ids: bool = Field(
        default=False, description="Ask vLLM for each chunk's token ids (a second token count source)."
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="Additional request body keys (top_p, seed, ...)."
    )
    client_processes: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Client processes driving the window together (services.bench.loadgen.loadgen_procs): the prompts, "
        "the concurrency cap and the warm-up are split over them, their records merged into one window on one clock.",
    )

    @model_validator(mode="after")
    def _check(self) -> WindowSpec:
        # No inert knob: a rate without a schedule, or a burstiness outside
        # poisson, would be accepted and change nothing.
        if self.arrival == "inf" and self.request_rate_per_s is not None:
            raise ValueError(
                "request_rate_per_s applies to arrival constant or poisson; arrival inf sends everything at once"
            )
        if self.arrival != "inf" and self.request_rate_per_s is None:
            raise ValueError(f"arrival {self.arrival} needs request_rate_per_s")
        if self.arrival != "poisson" and self.burstiness != 1.0:
            raise ValueError("burstiness applies to arrival poisson only")
        if self.max_concurrency is not None and self.max_concurrency < self.client_processes:
            raise ValueError(f"max_concurrency {self.max_concurrency} cannot be split over {self.client_processes} "
                             "client processes: each needs at least one request in flight")
        owned = sorted(_OWNED_KEYS & set(self.extra_body))
        if owned:
            raise ValueError(f"extra_body may not set {owned}: the load generator sets them")
        return self

    @property
    def schedule_burstiness(self) -> float | None:
        """timing.arrival_offsets_s's burstiness: None for constant spacing."""
        return None if self.arrival == "constant" else self.burstiness


class WindowRecord(Strict):
    """One measured window: the spec, every measured request's raw record, the scrapes."""

    version: Literal[1] = Field(default=WINDOW_VERSION, description="Version of this record.")
    spec: WindowSpec = Field(description="The load the window was driven with.")
    duration_s: float = Field(ge=0, description="First dispatch to the end of the last request, s.")
    requests: list[RequestRecord] = Field(description="Every measured request, in prompt order.")
    warmup_completed: int = Field(ge=0, description="Warm-up requests that succeeded (in no figure).")
    warmup_failed: int = Field(ge=0, description="Warm-up requests that failed (in no figure).")
    max_in_flight: int = Field(ge=0, description="Most measured requests in flight at once, as counted by the client.")
    metrics_before: str | None = Field(description="/metrics text scraped right before the window; None if it failed.")
    metrics_after: str | None = Field(description="/metrics text scraped right after the window; None if it failed.")
    metrics_error: str | None = Field(description="Why a scrape failed; None when both succeeded.")

    def summary(self, percentiles: Sequence[float] | None = None) -> WindowSummary:
        if percentiles is None:
            return summarize(self.requests, duration_s=self.duration_s)
        return summarize(self.requests, duration_s=self.duration_s, percentiles=percentiles)


Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


class Pool(Protocol):
    """What the generator needs of its HTTP layer (services.bench.loadgen.http1.Http1Pool; a fake in unit tests)."""

    def request_bytes(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str] | None = None
    ) -> Any: ...

    async def send(self, request: Any, sink: Sink | None = None, *, max_body: int = ...) -> Response: ...

    async def aclose(self) -> None: ...


PoolFactory = Callable[[WindowSpec, Clock], Pool]


def http1_pool(spec: WindowSpec, clock: Clock) -> Http1Pool:
    """The production pool: keep-alive HTTP/1.1 connections, one per request in flight."""
    return Http1Pool(spec.base_url, connect_timeout_s=spec.connect_timeout_s, clock=clock, ssl_context=_ssl_context())


_SSL: list[ssl.SSLContext] = []


def _ssl_context() -> ssl.SSLContext:
    # Built once per process on first use: building one costs milliseconds.
    if not _SSL:
        _SSL.append(ssl.create_default_context())
    return _SSL[0]


class LoadGenerator:
    """Drives windows against one served cell.

    `pool` (the HTTP layer), `clock` and `sleep` are seams for tests;
    production uses the defaults.
    """

    def __init__(
        self,
        spec: WindowSpec,
        *,
        pool: PoolFactory = http1_pool,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.spec = spec
        self._pool_factory = pool
        self._clock = clock
        self._sleep = sleep
        self._chat = spec.endpoint == "/v1/chat/completions"
        self._in_flight = 0
        self._max_in_flight = 0

    async def run_window(self, prompts: Sequence[Prompt]) -> WindowRecord:
        """Warm up, scrape, send `prompts` on the schedule, scrape again.

        In this process only: a spec with client_processes > 1 is driven by
        services.bench.loadgen.loadgen_procs.drive_window (which builds on this module, so
        this module never imports it).
        """
        if self.spec.client_processes > 1:
            raise ValueError(
                f"client_processes {self.spec.client_processes}: drive the window with "
                "services.bench.loadgen.loadgen_procs.drive_window, which starts the client processes"
            )
        return await self.run_window_at(prompts)

    async def run_window_at(
        self,
        prompts: Sequence[Prompt],
        *,
        ready: Callable[[], Awaitable[float | None]] | None = None,
        indices: Sequence[int] | None = None,
        offsets: Sequence[float] | None = None,
        scrape: bool = True,
    ) -> WindowRecord:
        """run_window with the seams of a client process of several (services.bench.loadgen.loadgen_procs).

        `ready` is awaited after the warm-up and returns the clock time the window starts
        at (None: now); `indices` are the records' window positions (default 0..n-1);
        `offsets` the prompts' arrival offsets from that start (default: the spec's
        schedule); `scrape` False skips both /metrics scrapes (the parent scrapes).
        """
        spec = self.spec
        if not prompts:
            raise PromptError("a window needs at least one prompt; check the corpus's heldout split or the shape count")
        pool = self._pool_factory(spec, self._clock)
        try:
            warm = []
            if spec.warmup_requests:
                warm = await self._drive(pool, cycle(list(prompts), spec.warmup_requests), scheduled=False)
            before, err_before = await self._scrape(pool) if scrape else (None, None)
            origin = await ready() if ready is not None else None
            if origin is not None:
                delay = origin - self._clock()
                if delay > 0:
                    await self._sleep(delay)
            start = self._clock() if origin is None else origin
            records = await self._drive(pool, prompts, scheduled=True, indices=indices, offsets=offsets, origin=origin)
            duration = max(0.0, max([start, *(r.end_s or start for r in records)]) - start)
            after, err_after = await self._scrape(pool) if scrape else (None, None)
        finally:
            await pool.aclose()
        warm_ok = sum(r.ok for r in warm)
        errors = [e for e in (err_before, err_after) if e]
        return WindowRecord(
            spec=spec,
            duration_s=duration,
            requests=records,
            warmup_completed=warm_ok,
            warmup_failed=len(warm) - warm_ok,
            max_in_flight=self._max_in_flight,
            metrics_before=before,
            metrics_after=after,
            metrics_error="; ".join(errors) or None,
        )

    async def _drive(self, pool: Pool, prompts: Sequence[Prompt], *, scheduled: bool,
                     indices: Sequence[int] | None = None, offsets: Sequence[float] | None = None,
                     origin: float | None = None) -> list[RequestRecord]:
        spec = self.spec
        # Requests are built before the clock starts: the window times sending, not encoding.
        requests = [pool.request_bytes("POST", spec.endpoint, self._body(p), _HEADERS) for p in prompts]
        if offsets is None:
            if scheduled and spec.arrival != "inf":
                offsets = arrival_offsets_s(
                    len(prompts),
                    request_rate_per_s=spec.request_rate_per_s,
                    burstiness=spec.schedule_burstiness,
                    rng=np.random.default_rng(spec.seed),
                )
            else:
                offsets = [0.0] * len(prompts)
        if indices is None:
            indices = range(len(prompts))
        gate = asyncio.Semaphore(spec.max_concurrency) if spec.max_concurrency else None
        self._in_flight = 0
        self._max_in_flight = 0

        async def one(index: int, prompt: Prompt, request: Any, issued: float) -> RequestRecord:
            if gate is None:
                return await self._counted(pool, index, prompt, request, issued=issued)
            async with gate:
                return await self._counted(pool, index, prompt, request, issued=issued)

        tasks = []
        if origin is None:
            origin = self._clock()
        for index, prompt, request, offset in zip(indices, prompts, requests, offsets, strict=False):
            delay = origin + offset - self._clock()
            if delay > 0:
                await self._sleep(delay)
            tasks.append(asyncio.create_task(one(index, prompt, request, self._clock())))
        return list(await asyncio.gather(*tasks))

    async def _counted(self, pool: Pool, index: int, prompt: Prompt, request: Any, *, issued: float) -> RequestRecord:
        self._in_flight += 1
        self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            return await self._request(pool, index, prompt, request, issued=issued)
        finally:
            self._in_flight -= 1

    def _body(self, prompt: Prompt) -> bytes:
        spec = self.spec
        body: dict[str, Any] = {"model": spec.model, "stream": True, "temperature": spec.temperature}
        if self._chat:
            body["messages"] = [m.model_dump() for m in prompt.messages]
            body["max_completion_tokens"] = prompt.max_output_tokens
        else:
            body["prompt"] = prompt.text
            body["max_tokens"] = prompt.max_output_tokens
        body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        if prompt.ignore_eos:
            body["ignore_eos"] = True  # vLLM's extension; sent only when the shape needs it
        if spec.return_token_ids:
            body["return_token_ids"] = True
        body.update(spec.extra_body)
        return orjson.dumps(body)

    async def _request(self, pool: Pool, index: int, prompt: Prompt, request: Any, *, issued: float) -> RequestRecord:
        clock = self._clock
        stream = StreamState(chat=self._chat)

        def sink(data: bytes, now: float) -> bool:
            stream.feed(data, now)
            return stream.error is not None  # a malformed or error event stops the read

        status: int | None = None
        kind: str | None = None
        error: str | None = None
        start = clock()
        try:
            async with asyncio.timeout(self.spec.request_timeout_s):
                response = await pool.send(request, sink, max_body=4 * ERROR_BODY_CHARS)
            status = response.status
            if status != 200:
                body = response.body[:ERROR_BODY_CHARS].decode(errors="replace")
                kind, error = f"http_{status}", f"HTTP {status}: {body}"
        except TimeoutError:
            kind, error = "timeout", f"no complete response within request_timeout_s={self.spec.request_timeout_s}"
        except ConnectTimeout as err:
            kind, error = "timeout", f"ConnectTimeout: {err}"
        except ConnectError as err:
            kind, error = "connect", f"cannot connect to {self.spec.base_url}: {err}"
        except ProtocolError as err:  # dropped connection, malformed response
            kind, error = "transport", f"{type(err).__name__}: {err}"
        end = clock()
        if kind is None:
            kind, error = stream.verdict()
        return RequestRecord(
            index=index,
            prompt_id=prompt.prompt_id,
            scheduled_s=issued,
            start_s=start,
            end_s=end,
            chunk_arrival_s=stream.times,
            chunk_tokens=stream.counts if stream.counts_known else None,
            output_tokens=stream.output_tokens() if kind is None else None,
            prompt_tokens=stream.prompt_tokens if stream.prompt_tokens is not None else prompt.input_tokens,
            status_code=status,
            error_kind=kind,
            error=error,
            finish_reason=stream.finish_reason,
            text="".join(stream.texts),
        )

    async def _scrape(self, pool: Pool) -> tuple[str | None, str | None]:
        return await scrape(pool)


async def scrape(pool: Pool) -> tuple[str | None, str | None]:
    """(/metrics text, None), or (None, why the scrape failed)."""
    try:
        async with asyncio.timeout(SCRAPE_TIMEOUT_S):
            response = await pool.send(pool.request_bytes("GET", "/metrics", None, {"accept": "text/plain"}))
    except TimeoutError:
        return None, f"GET /metrics failed: no answer within {SCRAPE_TIMEOUT_S:g} s"
    except (ConnectError, ConnectTimeout, ProtocolError) as err:
        return None, f"GET /metrics failed: {type(err).__name__}: {err}"
    if response.status != 200:
        return None, f"GET /metrics answered HTTP {response.status}"
    return response.body.decode("utf-8", "replace"), None


async def run_levels(
    spec: WindowSpec,
    prompts: Sequence[Prompt],
    levels: Sequence[int],
    **options: Any,
) -> list[WindowRecord]:
    """One window per concurrency level, in the order given (each with its own warm-up)."""
    windows = []
    for level in levels:
        # validated, unlike model_copy
        level_spec = WindowSpec.model_validate({**spec.model_dump(), "max_concurrency": level})
        generator = LoadGenerator(level_spec, **options)
        windows.append(await generator.run_window(prompts))
    return windows
