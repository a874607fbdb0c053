"""Figures derived from raw per-request timestamps (services.bench.loadgen.timing)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from services.bench.loadgen.timing import RequestRecord, arrival_offsets_s, derive, latency_stats, summarize


def record(
    index: int = 0,
    *,
    start: float = 10.0,
    arrivals=(10.2, 10.3, 10.6),
    tokens=(3, 2, 3),
    output=None,
    error: str | None = None,
    kind: str | None = None,
    scheduled: float | None = None,
    prompt_tokens=7,
) -> RequestRecord:
    ok = error is None
    return RequestRecord(
        index=index,
        prompt_id=f"p{index}",
        scheduled_s=start if scheduled is None else scheduled,
        start_s=start,
        end_s=(arrivals[-1] if arrivals else start) + 0.01,
        chunk_arrival_s=list(arrivals) if ok else [],
        chunk_tokens=(list(tokens) if tokens is not None else None) if ok else [],
        output_tokens=(output if output is not None else sum(tokens)) if ok else None,
        prompt_tokens=prompt_tokens,
        status_code=200 if ok else 500,
        error_kind=kind,
        error=error,
        finish_reason="length" if ok else None,
        text="x" if ok else "",
    )


def test_derive_uses_token_counts_not_chunks():
    timing = derive(record())
    assert timing.ttft_s == pytest.approx(0.2)
    assert timing.e2el_s == pytest.approx(0.6)
    # 8 tokens in 3 chunks: TPOT divides by 7 tokens, not by 2 chunk gaps.
    assert timing.tpot_s == pytest.approx(0.4 / 7)
    assert timing.itl_s == pytest.approx([0.1, 0.3])
    assert timing.output_tokens == 8


def test_single_token_request_has_no_tpot():
    timing = derive(record(arrivals=(10.5,), tokens=(1,)))
    assert timing.tpot_s is None
    assert timing.ttft_s == pytest.approx(timing.e2el_s)


def test_queue_time_is_start_minus_scheduled():
    assert derive(record(start=10.0, scheduled=9.25)).queue_s == pytest.approx(0.75)


def test_failed_request_has_no_timing():
    with pytest.raises(ValueError, match="failed"):
        derive(record(error="HTTP 500: boom", kind="http_500"))


def test_record_invariants():
    with pytest.raises(ValidationError, match="together"):
        record(error="x", kind=None)
    with pytest.raises(ValidationError, match="one count per chunk"):
        record(arrivals=(10.1, 10.2), tokens=(1,), output=1)
    with pytest.raises(ValidationError, match="at least one token chunk"):
        record(arrivals=(), tokens=())


def test_summary_counts_failures_by_kind_and_keeps_them_out_of_latencies():
    records = [
        record(0, start=0.0, arrivals=(0.1, 0.2), tokens=(2, 2)),
        record(1, start=0.0, arrivals=(0.3, 0.5), tokens=(1, 3)),
        record(2, error="HTTP 500: x", kind="http_500"),
        record(3, error="HTTP 500: y", kind="http_500"),
        record(4, error="deadline", kind="timeout"),
    ]
    s = summarize(records, duration_s=2.0)
    assert (s.completed, s.failed) == (2, 3)
    assert s.failures_by_kind == {"http_500": 2, "timeout": 1}
    assert s.total_output_tokens == 8
    assert s.total_input_tokens == 14
    assert s.total_chunks == 4
    assert s.output_throughput_tok_per_s == pytest.approx(4.0)
    assert s.request_throughput_per_s == pytest.approx(1.0)
    assert s.ttft.count == 2
    assert s.ttft.median_ms == pytest.approx(200.0)
    assert s.tpot.mean_ms == pytest.approx(np.mean([100 / 3, 200 / 3]))
    assert s.itl.count == 2
    assert s.e2el.percentiles_ms["p50"] == pytest.approx(350.0)


def test_summary_without_success_has_null_latencies():
    s = summarize([record(error="x", kind="connect")], duration_s=1.0)
    assert s.completed == 0 and s.failed == 1
    assert s.ttft.median_ms is None and s.tpot.mean_ms is None
    assert all(v is None for v in s.ttft.percentiles_ms.values())


def test_peak_tokens_per_second_counts_tokens_per_chunk():
    # One request: 5 tokens then 7 tokens in the same second, 1 in the next.
    s = summarize([record(start=0.0, arrivals=(0.2, 0.4, 1.5), tokens=(5, 7, 1))], duration_s=2.0)
    assert s.max_output_tokens_per_s == 12
    assert s.max_concurrent_requests == 1


def test_latency_stats_percentile_names():
    stats = latency_stats([0.001, 0.002, 0.003, 0.004], percentiles=(50, 99.9))
    assert set(stats.percentiles_ms) == {"p50", "p99.9"}
    assert stats.percentiles_ms["p50"] == pytest.approx(2.5)
    assert stats.std_ms == pytest.approx(np.std([1, 2, 3, 4]))


def test_arrival_inf_sends_everything_at_once():
    assert arrival_offsets_s(4, request_rate_per_s=None, burstiness=1.0, rng=np.random.default_rng(0)) == [0.0] * 4


def test_arrival_constant_is_evenly_spaced():
    offsets = arrival_offsets_s(5, request_rate_per_s=10.0, burstiness=None, rng=np.random.default_rng(0))
    assert offsets == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_arrival_gamma_matches_rate_and_burstiness(burstiness):
    n, rate = 20_000, 50.0
    offsets = np.array(
        arrival_offsets_s(n, request_rate_per_s=rate, burstiness=burstiness, rng=np.random.default_rng(1))
    )
    gaps = np.diff(np.concatenate([[0.0], offsets]))
    assert offsets[-1] == pytest.approx(n / rate)  # rescaled like vLLM: the offered load is exact
    assert np.all(gaps >= 0)
    # Gamma with shape k has coefficient of variation 1/sqrt(k): Poisson (k=1) has CV 1.
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1 / np.sqrt(burstiness), rel=0.05)


def test_arrival_rejects_bad_rate():
    with pytest.raises(ValueError):
        arrival_offsets_s(3, request_rate_per_s=0.0, burstiness=1.0, rng=np.random.default_rng(0))
