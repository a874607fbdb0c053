"""One trial's result JSON: `vllm bench serve --save-result --save-detailed` keys and units, plus specdec's blocks.

Keys and units follow vLLM's writer so that the gate reads a specdec file and an operator's vLLM file the
same way; where they differ on purpose (a latency with no value is null, never 0):
docs/bench-loadgen.md#the-trial-result-file-resultspy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from contracts.artifacts.results import Evaluation, TrialIdentity, TrialResultBlocks, attach_blocks
from contracts.events import SpecDecodeDelta
from services.bench.errors import ResultError
from services.bench.loadgen.loadgen import WindowRecord
from services.bench.loadgen.timing import DEFAULT_PERCENTILES, LatencyStats, derive

BACKENDS = {"/v1/completions": "openai", "/v1/chat/completions": "openai-chat"}


def build_result(
    window: WindowRecord,
    *,
    identity: TrialIdentity | None = None,
    spec_decode: SpecDecodeDelta | None = None,
    evaluation: Evaluation | None = None,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    detailed: bool = True,
    label: str | None = None,
    tokenizer_id: str | None = None,
    date: datetime | None = None,
) -> dict[str, Any]:
    """The trial's result dict (serialise with `dumps_result`)."""
    spec = window.spec
    if identity is not None and identity.concurrency != spec.max_concurrency:
        raise ResultError(
            f"identity.concurrency {identity.concurrency} but the window ran with max_concurrency "
            f"{spec.max_concurrency}: the identity must describe the load that was measured"
        )
    summary = window.summary(percentiles)
    result: dict[str, Any] = {
        "date": (date or datetime.now()).strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": BACKENDS[spec.endpoint],
        "backend": BACKENDS[spec.endpoint],
        "label": label,
        "model_id": spec.model,
        "tokenizer_id": tokenizer_id,
        "num_prompts": len(window.requests),
        "request_rate": "inf" if spec.request_rate_per_s is None else spec.request_rate_per_s,
        "burstiness": "inf" if spec.arrival == "constant" else spec.burstiness,
        "max_concurrency": spec.max_concurrency,
        "duration": summary.duration_s,
        "completed": summary.completed,
        "failed": summary.failed,
        "total_input_tokens": summary.total_input_tokens,
        "total_output_tokens": summary.total_output_tokens,
        "request_throughput": summary.request_throughput_per_s,
        "request_goodput": None,
        "output_throughput": summary.output_throughput_tok_per_s,
        "total_token_throughput": summary.total_token_throughput_tok_per_s,
    }
    if detailed:
        result.update(_detailed(window))
    result.update(
        {
            "max_output_tokens_per_s": summary.max_output_tokens_per_s,
            "max_concurrent_requests": summary.max_concurrent_requests,
            "rtfx": 0.0,
        }
    )
    if spec_decode is not None:
        result.update(vllm_spec_decode_keys(spec_decode))
    for name in ("ttft", "tpot", "itl", "e2el"):
        result.update(_stat_keys(name, getattr(summary, name)))
    if spec.max_concurrency is not None:
        result.update(_stat_keys("client_queue_time", summary.client_queue_time))
    # specdec-only facts about the window that vLLM has no key for.
    result["failures_by_kind"] = summary.failures_by_kind
    result["warmup_requests"] = window.warmup_completed + window.warmup_failed
    result["total_chunks"] = summary.total_chunks
    blocks = TrialResultBlocks(identity=identity, spec_decode=spec_decode, evaluation=evaluation)
    return attach_blocks(result, blocks)


def dumps_result(result: Mapping[str, Any]) -> bytes:
    """The result file's bytes (indented JSON, keys in the order built)."""
    return orjson.dumps(result, option=orjson.OPT_INDENT_2)


def vllm_spec_decode_keys(delta: SpecDecodeDelta) -> dict[str, Any]:
    """vLLM's own spec_decode_* keys for the same delta (written only when drafts were proposed, as vLLM does)."""
    if delta.num_draft_tokens <= 0:
        return {}
    drafts = delta.num_drafts
    return {
        "spec_decode_acceptance_rate": delta.num_accepted_tokens / delta.num_draft_tokens * 100,
        "spec_decode_acceptance_length": 1 + delta.num_accepted_tokens / drafts if drafts else 0.0,
        "spec_decode_num_drafts": drafts,
        "spec_decode_draft_tokens": delta.num_draft_tokens,
        "spec_decode_accepted_tokens": delta.num_accepted_tokens,
        "spec_decode_per_position_acceptance_rates": [n / drafts for n in delta.accepted_per_position]
        if drafts
        else [],
    }


def _detailed(window: WindowRecord) -> dict[str, list[Any]]:
    """vLLM's --save-detailed arrays, one entry per measured request in prompt order (seconds)."""
    ttfts, itls, latencies, output_lens = [], [], [], []
    for record in window.requests:
        if record.ok:
            timing = derive(record)
            ttfts.append(timing.ttft_s)
            itls.append(timing.itl_s)
            latencies.append(timing.e2el_s)
            output_lens.append(timing.output_tokens)
        else:  # vLLM's RequestFuncOutput defaults for a failed request
            ttfts.append(0.0)
            itls.append([])
            latencies.append(0.0)
            output_lens.append(0)
    return {
        "input_lens": [r.prompt_tokens or 0 for r in window.requests],
        "output_lens": output_lens,
        "ttfts": ttfts,
        "itls": itls,
        "latencies": latencies,
        "start_times": [r.start_s for r in window.requests],
        "queue_times": [r.start_s - r.scheduled_s for r in window.requests],
        "generated_texts": [r.text for r in window.requests],
        # Not a key of vLLM's format: which prompt each text answers, so that a
        # resumed bench can compare a candidate with a standing trial it adopted.
        "prompt_ids": [r.prompt_id for r in window.requests],
        "errors": [r.error or "" for r in window.requests],
    }


def _stat_keys(name: str, stats: LatencyStats) -> dict[str, float | None]:
    keys: dict[str, float | None] = {
        f"mean_{name}_ms": stats.mean_ms,
        f"median_{name}_ms": stats.median_ms,
        f"std_{name}_ms": stats.std_ms,
    }
    for pname, value in stats.percentiles_ms.items():
        keys[f"{pname}_{name}_ms"] = value
    return keys
