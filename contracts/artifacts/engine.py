"""What a running engine reports it runs, beside what its cell declared, version 1.

The bench-runner reads the effective config back from every server it starts
(the engine's own start-up record and its API, services/bench/executors/engine_config.py)
and stores one `EngineCheck` per launch at `layout.engine_check(folder)`. A
field whose effective value differs from the declared one fails the cell,
naming the field and both values; the report shows the effective config beside
the declared one. Declared `None` means "not declared": any effective value
passes, and so does a declared `dtype: auto`.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from contracts.campaign import SUFFIX_KEYS
from contracts.envelope import Key, Strict

ENGINE_CHECK_VERSION: Final = 1

# The serving fields compared, in report order.
CHECKED_FIELDS: tuple[str, ...] = (
    "model",
    "dtype",
    "quantization",
    "tensor_parallel_size",
    "graph_mode",
    "max_num_seqs",
    "max_model_len",
    "enable_prefix_caching",
    "max_num_batched_tokens",
    "kv_cache_dtype",
    "speculative_method",
    "num_speculative_tokens",
    "draft_model",
    "prompt_lookup_min",
    "prompt_lookup_max",
    "draft_tensor_parallel_size",
    "num_speculative_tokens_per_batch_size",
    *SUFFIX_KEYS,
)
# Speculative keys the engine's resolved-config line does not state: read from what the API server received
# after any wrapper (its "non-default args" line), else unverifiable (docs/bench-runner.md).
RECEIVED_SPECULATIVE_KEYS: tuple[str, ...] = ("prompt_lookup_min", "prompt_lookup_max", "draft_tensor_parallel_size",
                                              "num_speculative_tokens_per_batch_size", *SUFFIX_KEYS)


class EffectiveConfig(Strict):
    """The engine's resolved serving config; None where the engine did not say."""

    vllm_version: str | None = Field(description="The engine's version as it logged it.")
    model: str | None = Field(description="The served model (path or name) the engine loaded.")
    dtype: str | None = Field(description="Resolved dtype without the 'torch.' prefix (bfloat16, float32, ...).")
    quantization: str | None = Field(description="Quantization method; None for none.")
    tensor_parallel_size: int | None = Field(description="Tensor parallel size.")
    graph_mode: Literal["eager", "graph"] | None = Field(description="eager when enforce_eager=True, else graph.")
    max_num_seqs: int | None = Field(description="Sequences scheduled per step at most.")
    max_model_len: int | None = Field(description="Context length the engine serves (/v1/models' max_model_len).")
    enable_prefix_caching: bool | None = Field(default=None, description="Whether the engine caches prefixes (its "
                                               "config line's enable_prefix_caching); None where it did not say.")
    max_num_batched_tokens: int | None = Field(
        default=None, description="Tokens scheduled per step at most: the engine's own line where it logs the "
        "resolved value, else what the API server received ('non-default args'); None where neither says.")
    kv_cache_dtype: str | None = Field(default=None, description="KV-cache dtype as the engine's config line states "
                                       "it ('auto': the model's dtype).")
    speculative_method: str | None = Field(description="Speculative method the engine runs; None for none.")
    num_speculative_tokens: int | None = Field(description="Tokens proposed per step (k); None without speculation.")
    draft_model: str | None = Field(description="Draft model of a draft_model/eagle config; None otherwise.")
    sources: list[str] = Field(description="Where each value was read (log line, /v1/models), for the evidence.")
    received_speculative: dict[str, Any] | None = Field(
        default=None, description="The speculative config the API server received (its 'non-default args' line, "
        "after any wrapper): where prompt_lookup_min/max and draft_tensor_parallel_size are read; None when the log "
        "has no such line, {} when no speculative config was passed.")

    def value(self, field: str) -> Any:
        """One CHECKED_FIELDS entry: a received speculative key from what the API server received (the engine's
        config line states none of them: prompt lookup sizes, the draft's TP, the k schedule, the suffix keys),
        any other from this config."""
        if field in RECEIVED_SPECULATIVE_KEYS:
            return (self.received_speculative or {}).get(field)
        return getattr(self, field)


class FieldCheck(Strict):
    """One declared field against its effective value."""

    field: str = Field(description="One of CHECKED_FIELDS.")
    declared: Any = Field(description="The cell's declared value; None when the cell does not declare it.")
    effective: Any = Field(description="What the engine reports; None when it does not say.")
    ok: bool = Field(description="True when the engine runs what was declared (or nothing was declared).")
    unverifiable: bool = Field(default=False, description="True when the engine states the declared value nowhere: "
                               "the field is shown as unverifiable, never as checked (ok stays true: nothing "
                               "contradicts it).")


class EngineCheck(Strict):
    """The read-back of one launch: the effective config and every field compared."""

    version: Literal[1] = Field(default=ENGINE_CHECK_VERSION, description="Format version.")
    cell_id: Key = Field(description="The cell served.")
    launch: int = Field(ge=0, description="Index of the launch in the plan.")
    effective: EffectiveConfig = Field(description="What the engine reports it runs.")
    checks: list[FieldCheck] = Field(description="Every compared field, in CHECKED_FIELDS order.")

    @property
    def mismatches(self) -> list[FieldCheck]:
        return [check for check in self.checks if not check.ok]
