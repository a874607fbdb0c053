"""Reading one trial result, already decoded: its figures and one number per metric.

The gate decides on these and the publisher reports them, so both read a trial
the same way. Pure: the caller reads the file (the gate from disk, the
publisher through the bundle store). The blocks specdec adds to a result are
`contracts/artifacts/results.py`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError

from contracts.artifacts.results import TrialIdentity, read_blocks
from contracts.artifacts.speculation import Window, window_of
from contracts.events import SpecDecodeDelta

# --- reading a trial: one result JSON, already decoded -----------------------------

LATENCY_METRICS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")


@dataclass(frozen=True)
class RequestDetail:
    """Per-request values of the successful requests of one trial, in ms (from --save-detailed)."""

    ttft_ms: np.ndarray
    tpot_ms: np.ndarray  # requests with more than one output token, as vLLM computes TPOT
    itl_ms: np.ndarray  # every inter-chunk gap of every successful request, flattened
    e2el_ms: np.ndarray  # from `latencies`, or first token plus every gap in older files

    def values(self, metric: str) -> np.ndarray:
        array: np.ndarray = getattr(self, f"{metric}_ms")
        return array


@dataclass(frozen=True)
class Trial:
    """One trial: one cell at one concurrency level, measured once."""

    source: str
    completed: int
    failed: int
    concurrency: int | None  # None: the load had no concurrency limit
    model_id: str | None
    summary: Mapping[str, float]  # vLLM's numeric summary keys, e.g. median_tpot_ms, output_throughput
    detail: RequestDetail | None = None
    identity: TrialIdentity | None = None
    spec_decode: SpecDecodeDelta | None = None
    spec_decode_source: Literal["specdec", "vllm"] | None = None
    accuracy: float | None = None
    notes: tuple[str, ...] = field(default=())
    # How long the window's requests ran (its max_model_len is the reader's to add): the spec-decode rule's input.
    window: Window = field(default=Window())

    @property
    def cell_id(self) -> str | None:
        return self.identity.cell_id if self.identity else None

    @property
    def requests(self) -> int:
        return self.completed + self.failed


def parse_trial(raw: Any, *, source: str) -> Trial:
    """One trial from a decoded result JSON; ValueError says what is wrong with it."""
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object (an --append-result file holds several: write one file per trial)")
    completed = _count(raw, "completed", required=True)
    failed = _failed(raw, completed)
    try:
        blocks = read_blocks(raw)
    except ValidationError as err:
        raise ValueError(f"malformed specdec block: {_first_error(err)}") from None
    concurrency = _optional_int(raw, "max_concurrency")
    identity = blocks.identity
    if identity is not None and concurrency is not None and identity.concurrency != concurrency:
        raise ValueError(f"identity.concurrency {identity.concurrency} disagrees with max_concurrency {concurrency}")
    if identity is not None:
        concurrency = identity.concurrency
    summary = {
        key: float(value)
        for key, value in raw.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        and (key.endswith("_ms") or key in ("output_throughput", "request_throughput", "duration"))
    }
    spec_decode, spec_source = _spec_decode(raw, blocks.spec_decode)
    notes = []
    if identity is None:
        notes.append("no specdec identity block (plain vLLM result)")
    return Trial(
        source=source,
        completed=completed,
        failed=failed,
        concurrency=concurrency,
        model_id=raw.get("model_id") if isinstance(raw.get("model_id"), str) else None,
        summary=summary,
        detail=_detail(raw),
        identity=identity,
        spec_decode=spec_decode,
        spec_decode_source=spec_source,
        accuracy=blocks.evaluation.score if blocks.evaluation else None,
        notes=tuple(notes),
        window=window_of(raw, max_model_len=None),
    )


def _count(raw: Mapping[str, Any], key: str, *, required: bool = False) -> int:
    value = raw.get(key)
    if value is None and not required:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"`{key}` must be a non-negative integer, got {value!r}")
    return value


def _optional_int(raw: Mapping[str, Any], key: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"`{key}` must be a positive integer or null, got {value!r}")
    return value


def _failed(raw: Mapping[str, Any], completed: int) -> int:
    if raw.get("failed") is not None:
        return _count(raw, "failed")
    errors = raw.get("errors")
    if isinstance(errors, list):
        return sum(1 for e in errors if e)
    prompts = raw.get("num_prompts")
    # Older vLLM files carry no `failed`: whatever did not complete failed.
    return max(0, prompts - completed) if isinstance(prompts, int) else 0


def _spec_decode(
    raw: Mapping[str, Any], block: SpecDecodeDelta | None
) -> tuple[SpecDecodeDelta | None, Literal["specdec", "vllm"] | None]:
    """specdec's counter block when present, else vLLM's own spec_decode_* keys (rate in percent there)."""
    if block is not None:
        return block, "specdec"
    drafts = raw.get("spec_decode_num_drafts")
    draft_tokens = raw.get("spec_decode_draft_tokens")
    accepted = raw.get("spec_decode_accepted_tokens")
    if not (isinstance(drafts, int) and isinstance(draft_tokens, int) and isinstance(accepted, int)
            and min(drafts, draft_tokens, accepted) >= 0):
        return None, None
    per_position = raw.get("spec_decode_per_position_acceptance_rates") or []
    try:
        delta = SpecDecodeDelta(
            num_drafts=drafts,
            num_draft_tokens=draft_tokens,
            num_accepted_tokens=accepted,
            # vLLM stores accepted-at-position / drafts; undo it to get counts back.
            accepted_per_position=[round(float(rate) * drafts) for rate in per_position],
            acceptance_rate=accepted / draft_tokens if draft_tokens else None,
            mean_acceptance_length=1 + accepted / drafts if drafts else None,
        )
    except (ValidationError, TypeError, ValueError) as err:
        raise ValueError(f"vLLM spec_decode_* keys are malformed: {err}") from None
    return delta, "vllm"


def _detail(raw: Mapping[str, Any]) -> RequestDetail | None:
    """Per-request arrays when the file has them (--save-detailed), restricted to successful requests."""
    ttfts, itls, lens = raw.get("ttfts"), raw.get("itls"), raw.get("output_lens")
    if not (isinstance(ttfts, list) and isinstance(itls, list) and isinstance(lens, list)):
        return None
    n = len(ttfts)
    errors = raw.get("errors")
    if not isinstance(errors, list):
        errors = [""] * n
    latencies = raw.get("latencies")
    if not isinstance(latencies, list):
        latencies = None
    if len(itls) != n or len(lens) != n or len(errors) != n or (latencies is not None and len(latencies) != n):
        raise ValueError("--save-detailed arrays (ttfts, itls, output_lens, errors, latencies) differ in length")
    try:
        ok = np.array([not err and int(length) > 0 for err, length in zip(errors, lens, strict=True)], dtype=np.bool_)
        ttft_s = np.asarray(ttfts, dtype=float)
        out_len = np.asarray(lens, dtype=float)
        if latencies is not None:
            e2e_s = np.asarray(latencies, dtype=float)
        else:  # older files: a request's latency is its first token plus every later gap
            e2e_s = ttft_s + np.array([sum(gaps) for gaps in itls], dtype=float)
        itl_s = np.asarray([g for i, gaps in enumerate(itls) if ok[i] for g in gaps], dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"--save-detailed arrays hold non-numbers: {err}") from None
    # TPOT as vLLM defines it: (latency - ttft) / (output tokens - 1), requests with > 1 token.
    multi = ok & (out_len > 1)
    tpot_s = (e2e_s[multi] - ttft_s[multi]) / (out_len[multi] - 1)
    return RequestDetail(
        ttft_ms=ttft_s[ok] * 1e3,
        tpot_ms=tpot_s * 1e3,
        itl_ms=itl_s * 1e3,
        e2el_ms=e2e_s[ok] * 1e3,
    )


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']} ({err.error_count()} error(s) in all)"


# --- metrics: one figure per trial ---------------------------------------------------
# A metric is read as one number per trial: that is the unit the gate's
# statistics treat as independent. Latencies (ttft, tpot, itl, e2el) take a
# statistic over the trial's requests (median by default, mean or pNN); output
# throughput and the acceptance figures are already one number per trial, so a
# statistic does not apply to them.

Direction = Literal["higher_is_better", "lower_is_better"]

DIRECTIONS: dict[str, Direction] = {
    "ttft": "lower_is_better",
    "tpot": "lower_is_better",
    "itl": "lower_is_better",
    "e2el": "lower_is_better",
    "output_throughput": "higher_is_better",
    "acceptance_rate": "higher_is_better",
    "acceptance_length": "higher_is_better",
}
UNITS: dict[str, str] = {
    "ttft": "ms",
    "tpot": "ms",
    "itl": "ms",
    "e2el": "ms",
    "output_throughput": "tok/s",
    "acceptance_rate": "accepted/draft tokens",
    "acceptance_length": "tokens per step",
}
DEFAULT_STATISTIC = "median"


@dataclass(frozen=True)
class MetricKey:
    """A metric and, for latencies, the statistic over a trial's requests."""

    metric: str
    statistic: str | None  # median, mean, p99, p99.9; None where it does not apply

    @property
    def name(self) -> str:
        return f"{self.metric}:{self.statistic}" if self.statistic else self.metric

    @property
    def direction(self) -> Direction:
        return DIRECTIONS[self.metric]

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "higher_is_better"

    @property
    def unit(self) -> str:
        return UNITS[self.metric]


def trial_value(trial: Trial, key: MetricKey) -> float | None:
    """The trial's figure for `key`; None when the file does not carry it."""
    if key.metric == "acceptance_rate":
        return trial.spec_decode.acceptance_rate if trial.spec_decode else None
    if key.metric == "acceptance_length":
        return trial.spec_decode.mean_acceptance_length if trial.spec_decode else None
    if key.metric == "output_throughput":
        return trial.summary.get("output_throughput")
    # vLLM's own summary first: it was computed on the same requests by the same code.
    value = trial.summary.get(f"{key.statistic}_{key.metric}_ms")
    if value is not None:
        return value
    if trial.detail is None:
        return None
    values = trial.detail.values(key.metric)
    if values.size == 0:
        return None
    if key.statistic == "mean":
        return float(np.mean(values))
    if key.statistic == "median":
        return float(np.median(values))
    return float(np.percentile(values, float(key.statistic[1:])))  # type: ignore[index]  # a latency key has a statistic
