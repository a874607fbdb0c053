"""Raw per-request timestamps and the figures derived from them (pure: no I/O).

Every figure is derived here with vLLM's definitions, so specdec's numbers and `vllm bench serve`'s mean
the same (docs/bench-loadgen.md#how-figures-are-derived-timingpy). A `RequestRecord`'s `chunk_arrival_s`
is non-decreasing from `start_s`, with one positive count per arrival when counts are known; a request
whose `error` is set is in `failed` and in no latency."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import Field, model_validator

from contracts.envelope import Strict

# Percentiles written by default: vLLM writes p99 only by default; the gate
# reads medians and tail percentiles, so p50/p90/p95 come along.
DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0)
LATENCY_METRICS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")


class RequestRecord(Strict):
    """One request as the load generator saw it: raw clock values, counts, outcome."""

    index: int = Field(ge=0, description="Position of the request in the measured window's prompt list.")
    prompt_id: str = Field(description="ID of the prompt sent (a corpus record ID or a shaped prompt ID).")
    scheduled_s: float = Field(description="time.monotonic() when the request was due by the arrival schedule, s.")
    start_s: float = Field(description="time.monotonic() right before the request was sent, s.")
    end_s: float | None = Field(
        description="time.monotonic() when the response ended or failed, s; None if never sent."
    )
    chunk_arrival_s: list[float] = Field(
        description="time.monotonic() when the read carrying each token-bearing chunk arrived, s.")
    chunk_tokens: list[int] | None = Field(
        description="Tokens carried by each token-bearing chunk (server usage deltas or token ids); "
        "None when the server reported only the total."
    )
    output_tokens: int | None = Field(ge=0, description="Output tokens of the request, from the server's usage.")
    prompt_tokens: int | None = Field(
        ge=0, description="Prompt tokens: the server's usage, else the prompt's own count."
    )
    status_code: int | None = Field(description="HTTP status of the response; None when no response arrived.")
    error_kind: str | None = Field(
        description="Failure class (http_500, timeout, connect, stream, ...); None on success."
    )
    error: str | None = Field(description="Failure in words; None on success.")
    finish_reason: str | None = Field(description="finish_reason of the last choice chunk (length, stop, ...).")
    text: str = Field(description="Generated text, concatenated from the chunks.")

    @model_validator(mode="after")
    def _check(self) -> RequestRecord:
        if (self.error is None) != (self.error_kind is None):
            raise ValueError("error and error_kind are set together")
        if self.chunk_tokens is not None and len(self.chunk_tokens) != len(self.chunk_arrival_s):
            raise ValueError("chunk_tokens needs one count per chunk arrival")
        if self.error is None:
            if not self.chunk_arrival_s:
                raise ValueError("a successful request has at least one token chunk")
            if self.output_tokens is None:
                raise ValueError("a successful request has an output token count")
        return self

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class RequestTiming:
    """Derived figures of one successful request, seconds."""

    ttft_s: float
    e2el_s: float
    tpot_s: float | None  # None with a single output token
    itl_s: list[float]
    queue_s: float
    output_tokens: int
    prompt_tokens: int


def derive(record: RequestRecord) -> RequestTiming:
    """TTFT, E2EL, TPOT and ITLs of a successful request, by vLLM's definitions (docs/bench-loadgen.md)."""
    if not record.ok:
        raise ValueError(f"request {record.index} failed ({record.error_kind}); failures have no timing")
    arrivals = record.chunk_arrival_s
    ttft = arrivals[0] - record.start_s
    e2el = arrivals[-1] - record.start_s
    out = record.output_tokens or 0
    tpot = (e2el - ttft) / (out - 1) if out > 1 else None
    itl = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    return RequestTiming(
        ttft_s=ttft,
        e2el_s=e2el,
        tpot_s=tpot,
        itl_s=itl,
        queue_s=record.start_s - record.scheduled_s,
        output_tokens=out,
        prompt_tokens=record.prompt_tokens or 0,
    )


class LatencyStats(Strict):
    """Distribution of one latency metric over the window, ms (numpy's linear percentiles)."""

    count: int = Field(ge=0, description="Values the statistics were computed on.")
    mean_ms: float | None = Field(description="Mean, ms; None without values.")
    median_ms: float | None = Field(description="Median, ms; None without values.")
    std_ms: float | None = Field(description="Population standard deviation (numpy's default), ms.")
    percentiles_ms: dict[str, float | None] = Field(
        description="Percentile name (p50, p99, p99.9) -> value, ms; values None without data."
    )


def percentile_name(p: float) -> str:
    """vLLM's key spelling: p99, p99.9."""
    return "p" + (str(int(p)) if int(p) == p else str(p))


def latency_stats(values_s: Sequence[float], percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> LatencyStats:
    names = [percentile_name(p) for p in percentiles]
    if not values_s:
        return LatencyStats(count=0, mean_ms=None, median_ms=None, std_ms=None, percentiles_ms=dict.fromkeys(names))
    ms = np.asarray(values_s, dtype=float) * 1e3
    return LatencyStats(
        count=int(ms.size),
        mean_ms=float(np.mean(ms)),
        median_ms=float(np.median(ms)),
        std_ms=float(np.std(ms)),
        percentiles_ms={name: float(np.percentile(ms, p)) for name, p in zip(names, percentiles, strict=True)},
    )


class WindowSummary(Strict):
    """Figures of one measured window, successful requests only (warm-up is never in a window)."""

    completed: int = Field(ge=0, description="Requests that succeeded.")
    failed: int = Field(ge=0, description="Requests that failed.")
    failures_by_kind: dict[str, int] = Field(description="Failed requests per error_kind.")
    duration_s: float = Field(ge=0, description="Window length: first dispatch to the end of the last request, s.")
    total_input_tokens: int = Field(ge=0, description="Prompt tokens of the successful requests.")
    total_output_tokens: int = Field(ge=0, description="Output tokens of the successful requests.")
    total_chunks: int = Field(ge=0, description="Token-bearing chunks received by the successful requests.")
    request_throughput_per_s: float = Field(ge=0, description="completed / duration_s.")
    output_throughput_tok_per_s: float = Field(ge=0, description="total_output_tokens / duration_s.")
    total_token_throughput_tok_per_s: float = Field(ge=0, description="(input + output tokens) / duration_s.")
    max_output_tokens_per_s: float = Field(
        ge=0, description="Most output tokens that arrived within one second bucket."
    )
    max_concurrent_requests: int = Field(ge=0, description="Most requests active within one second bucket (vLLM's).")
    ttft: LatencyStats = Field(description="Time to first token.")
    tpot: LatencyStats = Field(description="Time per output token after the first (requests with > 1 token).")
    itl: LatencyStats = Field(description="Gaps between token chunks, every gap of every request.")
    e2el: LatencyStats = Field(description="End-to-end latency to the last token chunk.")
    client_queue_time: LatencyStats = Field(description="Wait for a concurrency slot before sending.")


def summarize(
    records: Sequence[RequestRecord],
    *,
    duration_s: float,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
) -> WindowSummary:
    """The window's figures; failures are counted by kind and kept out of every latency."""
    ok = [r for r in records if r.ok]
    timings = [derive(r) for r in ok]
    failures = Counter(r.error_kind for r in records if not r.ok)
    total_in = sum(t.prompt_tokens for t in timings)
    total_out = sum(t.output_tokens for t in timings)
    per_s = 1.0 / duration_s if duration_s > 0 else 0.0
    peak_tokens, peak_active = _peaks(ok)
    return WindowSummary(
        completed=len(ok),
        failed=len(records) - len(ok),
        failures_by_kind=dict(sorted(failures.items())),
        duration_s=duration_s,
        total_input_tokens=total_in,
        total_output_tokens=total_out,
        total_chunks=sum(len(r.chunk_arrival_s) for r in ok),
        request_throughput_per_s=len(ok) * per_s,
        output_throughput_tok_per_s=total_out * per_s,
        total_token_throughput_tok_per_s=(total_in + total_out) * per_s,
        max_output_tokens_per_s=peak_tokens,
        max_concurrent_requests=peak_active,
        ttft=latency_stats([t.ttft_s for t in timings], percentiles),
        tpot=latency_stats([t.tpot_s for t in timings if t.tpot_s is not None], percentiles),
        itl=latency_stats([gap for t in timings for gap in t.itl_s], percentiles),
        e2el=latency_stats([t.e2el_s for t in timings], percentiles),
        client_queue_time=latency_stats([t.queue_s for t in timings], percentiles),
    )


def chunk_token_counts(record: RequestRecord) -> list[float]:
    """Tokens per chunk; when the server gave only the total, spread evenly over the chunks
    (an estimate used for the per-second peak only, never for TPOT)."""
    if record.chunk_tokens is not None:
        return [float(n) for n in record.chunk_tokens]
    n = len(record.chunk_arrival_s)
    return [(record.output_tokens or 0) / n] * n if n else []


def _peaks(ok: Sequence[RequestRecord]) -> tuple[float, int]:
    """vLLM's peak output tokens per one-second bucket and peak active requests, with
    real token counts per chunk (vLLM's own client counts one token per chunk here)."""
    if not ok:
        return 0.0, 0
    origin = min(r.start_s for r in ok)
    last = max(r.chunk_arrival_s[-1] for r in ok)
    buckets = int(math.ceil(last - origin)) + 1
    tokens = np.zeros(buckets)
    active = np.zeros(buckets, dtype=np.int64)
    for r in ok:
        for t, n in zip(r.chunk_arrival_s, chunk_token_counts(r), strict=False):
            tokens[int(t - origin)] += n
        active[int(r.start_s - origin) : int(r.chunk_arrival_s[-1] - origin) + 1] += 1
    return float(tokens.max()), int(active.max())


def arrival_offsets_s(
    count: int,
    *,
    request_rate_per_s: float | None,
    burstiness: float | None,
    rng: np.random.Generator,
) -> list[float]:
    """When each request is due, seconds from the window's start (vLLM's schedule).

    request_rate_per_s None: every request at once. burstiness None: constant
    spacing 1/rate. Otherwise gamma-distributed gaps of shape `burstiness` and
    mean 1/rate (1.0 is a Poisson process; < 1 burstier, > 1 more even),
    rescaled, as vLLM does, so that the last request is due at count/rate:
    the offered load is the same whatever the seed.
    """
    if count <= 0:
        return []
    if request_rate_per_s is None:
        return [0.0] * count
    if not request_rate_per_s > 0:
        raise ValueError(f"request_rate_per_s must be > 0, got {request_rate_per_s}")
    if burstiness is None:
        gaps = np.full(count, 1.0 / request_rate_per_s)
    else:
        if not burstiness > 0:
            raise ValueError(f"burstiness must be > 0, got {burstiness}")
        gaps = rng.gamma(shape=burstiness, scale=1.0 / (request_rate_per_s * burstiness), size=count)
    offsets = np.cumsum(gaps)
    if offsets[-1] > 0:
        offsets *= (count / request_rate_per_s) / offsets[-1]
    return [float(x) for x in offsets]
