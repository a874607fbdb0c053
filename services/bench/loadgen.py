"""specdec's load generator: streaming OpenAI-API requests over httpx, raw timestamps out.

One measured window = warm-up requests (counted, never measured), a /metrics
scrape, the window's requests on the arrival schedule under the concurrency
cap, a second /metrics scrape. `run_levels` runs one window per concurrency
level of a cell. Figures come from `services.bench.timing`; nothing here
computes a latency.

Token counts: every request asks for `stream_options.include_usage` and
`continuous_usage_stats` (vLLM then puts the cumulative usage on every chunk),
so each chunk's token count is the usage delta; with `return_token_ids` the
chunk's token ids count when usage is missing. A chunk is never assumed to be
one token. A chunk that carries no token (the chat role chunk, the final usage
chunk) is no arrival.

Failures are data: a non-200 status, a dropped connection, a timeout, a
malformed stream or a stream without tokens becomes a `RequestRecord` with
`error_kind` and `error`; a window never raises for a request.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import httpx
import numpy as np
import orjson
from pydantic import Field, model_validator

from contracts.envelope import Strict
from services.bench.errors import PromptError
from services.bench.prompts import Prompt, cycle
from services.bench.sse import ERROR_BODY_CHARS, StreamState
from services.bench.timing import RequestRecord, WindowSummary, arrival_offsets_s, summarize

Endpoint = Literal["/v1/completions", "/v1/chat/completions"]
Arrival = Literal["inf", "constant", "poisson"]
WINDOW_VERSION = 1
# Request keys the load generator owns; extra_body may not replace them.
_OWNED_KEYS = frozenset({"model", "prompt", "messages", "max_tokens", "max_completion_tokens", "stream", "stream_options"})
_HEADERS = {"content-type": "application/json", "accept": "text/event-stream"}


class WindowSpec(Strict):
    """How one window drives a served cell."""

    base_url: str = Field(pattern=r"^https?://", description="http://host:port of the served cell.")
    endpoint: Endpoint = Field(default="/v1/completions", description="Streaming endpoint the requests go to.")
    model: str = Field(min_length=1, description="`model` of every request: the served model name.")
    arrival: Arrival = Field(
        default="inf", description="inf: every request at once; constant: every 1/rate s; poisson: gamma gaps (burstiness)."
    )
    request_rate_per_s: float | None = Field(default=None, gt=0, description="Offered requests per second; None with arrival inf.")
    burstiness: float = Field(default=1.0, gt=0, description="Gamma shape of poisson gaps: 1 Poisson, < 1 burstier, > 1 more even.")
    max_concurrency: int | None = Field(default=None, ge=1, description="Requests in flight at most; None for no cap.")
    warmup_requests: int = Field(default=0, ge=0, description="Requests sent before the window and excluded from every figure.")
    temperature: float = Field(default=0.0, ge=0, description="Sampling temperature (0: greedy, needed by the agreement eval).")
    request_timeout_s: float = Field(default=600.0, gt=0, description="Deadline of one request, send to last byte, s.")
    connect_timeout_s: float = Field(default=10.0, gt=0, description="Deadline of one connection attempt, s.")
    seed: int = Field(default=0, description="Seed of the arrival schedule.")
    return_token_ids: bool = Field(default=False, description="Ask vLLM for each chunk's token ids (a second token count source).")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="Additional request body keys (top_p, seed, ...).")

    @model_validator(mode="after")
    def _check(self) -> WindowSpec:
        # No inert knob: a rate without a schedule, or a burstiness outside
        # poisson, would be accepted and change nothing.
        if self.arrival == "inf" and self.request_rate_per_s is not None:
            raise ValueError("request_rate_per_s applies to arrival constant or poisson; arrival inf sends everything at once")
        if self.arrival != "inf" and self.request_rate_per_s is None:
            raise ValueError(f"arrival {self.arrival} needs request_rate_per_s")
        if self.arrival != "poisson" and self.burstiness != 1.0:
            raise ValueError("burstiness applies to arrival poisson only")
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


class LoadGenerator:
    """Drives windows against one served cell.

    `transport` (shared by every client, e.g. httpx.MockTransport), `clock` and
    `sleep` are seams for tests; production uses the defaults.
    """

    def __init__(
        self,
        spec: WindowSpec,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock = time.perf_counter,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.spec = spec
        self._transport = transport
        self._clock = clock
        self._sleep = sleep
        self._chat = spec.endpoint == "/v1/chat/completions"
        self._in_flight = 0
        self._max_in_flight = 0
        # One TLS context for every client: building one per client costs milliseconds each.
        self._ssl = ssl.create_default_context()

    async def run_window(self, prompts: Sequence[Prompt]) -> WindowRecord:
        """Warm up, scrape, send `prompts` on the schedule, scrape again."""
        spec = self.spec
        if not prompts:
            raise PromptError("a window needs at least one prompt; check the corpus's heldout split or the shape count")
        clients = _Clients(self._new_client)
        try:
            warm = []
            if spec.warmup_requests:
                warm = await self._drive(clients, cycle(list(prompts), spec.warmup_requests), scheduled=False)
            before, err_before = await self._scrape(clients)
            start = self._clock()
            records = await self._drive(clients, prompts, scheduled=True)
            duration = max(0.0, max([start, *(r.end_s or start for r in records)]) - start)
            after, err_after = await self._scrape(clients)
        finally:
            await clients.aclose()
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

    def _new_client(self) -> httpx.AsyncClient:
        """A client that holds one connection (see _Clients for why)."""
        transport = self._transport or httpx.AsyncHTTPTransport(
            verify=self._ssl,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=60.0),
            retries=0,
        )
        return httpx.AsyncClient(
            base_url=self.spec.base_url,
            transport=transport,
            timeout=httpx.Timeout(
                connect=self.spec.connect_timeout_s,
                read=self.spec.request_timeout_s,
                write=self.spec.request_timeout_s,
                pool=None,  # one request per client at a time: the pool never makes a request wait
            ),
            trust_env=False,  # a proxy from the environment must not sit between the bench and the server
            follow_redirects=False,
        )

    async def _drive(self, clients: _Clients, prompts: Sequence[Prompt], *, scheduled: bool) -> list[RequestRecord]:
        spec = self.spec
        # Requests are built before the clock starts: the window times sending, not encoding.
        url = httpx.URL(self.spec.base_url.rstrip("/") + self.spec.endpoint)  # parsed once, not per request
        requests = [httpx.Request("POST", url, content=self._body(p), headers=_HEADERS) for p in prompts]
        if scheduled and spec.arrival != "inf":
            offsets = arrival_offsets_s(
                len(prompts),
                request_rate_per_s=spec.request_rate_per_s,
                burstiness=spec.schedule_burstiness,
                rng=np.random.default_rng(spec.seed),
            )
        else:
            offsets = [0.0] * len(prompts)
        gate = asyncio.Semaphore(spec.max_concurrency) if spec.max_concurrency else None
        self._in_flight = 0
        self._max_in_flight = 0

        async def one(index: int, prompt: Prompt, request: httpx.Request, issued: float) -> RequestRecord:
            if gate is None:
                return await self._counted(clients, index, prompt, request, issued)
            async with gate:
                return await self._counted(clients, index, prompt, request, issued)

        tasks = []
        origin = self._clock()
        for index, (prompt, request, offset) in enumerate(zip(prompts, requests, offsets)):
            delay = origin + offset - self._clock()
            if delay > 0:
                await self._sleep(delay)
            tasks.append(asyncio.create_task(one(index, prompt, request, self._clock())))
        return list(await asyncio.gather(*tasks))

    async def _counted(
        self, clients: _Clients, index: int, prompt: Prompt, request: httpx.Request, issued: float
    ) -> RequestRecord:
        self._in_flight += 1
        self._max_in_flight = max(self._max_in_flight, self._in_flight)
        client = clients.take()
        try:
            return await self._request(client, index, prompt, request, issued)
        finally:
            clients.give(client)
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

    async def _request(
        self, client: httpx.AsyncClient, index: int, prompt: Prompt, request: httpx.Request, issued: float
    ) -> RequestRecord:
        clock = self._clock
        stream = StreamState(chat=self._chat)
        status: int | None = None
        kind: str | None = None
        error: str | None = None
        start = clock()
        try:
            async with asyncio.timeout(self.spec.request_timeout_s):
                response = await client.send(request, stream=True)
                try:
                    status = response.status_code
                    if status != 200:
                        raw = await response.aread()
                        kind, error = f"http_{status}", f"HTTP {status}: {raw[:ERROR_BODY_CHARS].decode(errors='replace')}"
                    else:
                        async for data in response.aiter_raw():
                            stream.feed(data, clock())
                            if stream.error is not None:
                                break
                finally:
                    await response.aclose()
        except TimeoutError:
            kind, error = "timeout", f"no complete response within request_timeout_s={self.spec.request_timeout_s}"
        except httpx.TimeoutException as err:
            kind, error = "timeout", f"{type(err).__name__}: {err}"
        except httpx.ConnectError as err:
            kind, error = "connect", f"cannot connect to {self.spec.base_url}: {err}"
        except httpx.HTTPError as err:  # dropped connection, protocol error, ...
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

    async def _scrape(self, clients: _Clients) -> tuple[str | None, str | None]:
        client = clients.take()
        try:
            response = await client.get("/metrics", timeout=30.0)
        except httpx.HTTPError as err:
            return None, f"GET /metrics failed: {type(err).__name__}: {err}"
        finally:
            clients.give(client)
        if response.status_code != 200:
            return None, f"GET /metrics answered HTTP {response.status_code}"
        return response.text, None


async def run_levels(
    spec: WindowSpec,
    prompts: Sequence[Prompt],
    levels: Sequence[int],
    **options: Any,
) -> list[WindowRecord]:
    """One window per concurrency level, in the order given (each with its own warm-up)."""
    windows = []
    for level in levels:
        level_spec = WindowSpec.model_validate({**spec.model_dump(), "max_concurrency": level})  # validated, unlike model_copy
        generator = LoadGenerator(level_spec, **options)
        windows.append(await generator.run_window(prompts))
    return windows


class _Clients:
    """A free list of one-connection httpx clients, reused last-in first-out.

    httpx's connection pool scans every pooled connection (with a readability
    poll on each idle one) whenever a request starts or ends: with hundreds of
    streams that scan, not the streams, takes the client's core. A client per
    connection keeps that work constant per request; the semaphore, not the
    pool, caps concurrency.
    """

    def __init__(self, make: Callable[[], httpx.AsyncClient]) -> None:
        self._make = make
        self._idle: list[httpx.AsyncClient] = []
        self._all: list[httpx.AsyncClient] = []

    def take(self) -> httpx.AsyncClient:
        if self._idle:
            return self._idle.pop()
        client = self._make()
        self._all.append(client)
        return client

    def give(self, client: httpx.AsyncClient) -> None:
        self._idle.append(client)

    async def aclose(self) -> None:
        for client in self._all:
            await client.aclose()
