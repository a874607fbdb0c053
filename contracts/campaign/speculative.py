"""The speculative config of a cell and of the standing deployment: vLLM's --speculative-config."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from contracts.campaign.schedule import schedule_problems
from contracts.envelope import Strict

SpecMethod = Literal["ngram", "suffix", "draft_model", "eagle", "eagle3", "mtp", "medusa"]
# Methods whose proposer is a separate model checkpoint.
METHODS_WITH_MODEL = frozenset({"draft_model", "eagle", "eagle3", "medusa"})
# The suffix method's own keys (SpeculativeConfig below), passed to vLLM and read back like the rest.
SUFFIX_KEYS: tuple[str, ...] = ("suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests",
                                "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob")
# The speculative model that names the draft this campaign trains.
TRAINED_DRAFT = "{training.output}"


class SpeculativeConfig(Strict):
    """A speculative-decoding config; becomes vLLM's --speculative-config JSON."""

    method: SpecMethod = Field(description="Speculative method.")
    num_speculative_tokens: int = Field(ge=1, le=32, description="Tokens proposed per step (k).")
    model: str | None = Field(
        default=None,
        description="Draft/proposer checkpoint for draft_model, eagle, eagle3, medusa; "
        "'{training.output}' names the draft this campaign trains.",
    )
    prompt_lookup_min: int | None = Field(default=None, ge=1, description="ngram: smallest n-gram to match.")
    prompt_lookup_max: int | None = Field(default=None, ge=1, description="ngram: largest n-gram to match.")
    draft_tensor_parallel_size: int | None = Field(default=None, ge=1, description="Tensor parallel size of the draft.")
    # suffix: vLLM's SpeculativeConfig keys of the same names (its defaults 24, 10000, 1.0, 0.1 when unset).
    suffix_decoding_max_tree_depth: int | None = Field(
        default=None, ge=1, description="suffix: deepest suffix tree (prefix match plus draft length).")
    suffix_decoding_max_cached_requests: int | None = Field(
        default=None, ge=0, description="suffix: requests kept in the global tree (FIFO); 0 disables it.")
    suffix_decoding_max_spec_factor: float | None = Field(
        default=None, ge=0, description="suffix: draft length at most this times the prefix match length.")
    suffix_decoding_min_token_prob: float | None = Field(
        default=None, ge=0, le=1, description="suffix: smallest estimated probability of a drafted token.")
    num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None = Field(
        default=None,
        description="A k per batch size: [[start_bs, end_bs, k], ...], inclusive non-overlapping ascending ranges, "
        "the first starting at 1, each k from 0 to num_speculative_tokens (vLLM's dynamic speculation; "
        "contracts/campaign/schedule.py). None: k every step.",
    )

    @model_validator(mode="after")
    def _check_schedule(self) -> SpeculativeConfig:
        entries = self.num_speculative_tokens_per_batch_size
        problems = [] if entries is None else schedule_problems(entries, self.num_speculative_tokens)
        if problems:
            raise ValueError("num_speculative_tokens_per_batch_size: " + "; ".join(problems))
        return self

    @model_validator(mode="after")
    def _check_method_fields(self) -> SpeculativeConfig:
        if self.method in METHODS_WITH_MODEL and not self.model:
            raise ValueError(f"speculative method {self.method} needs `model` (a checkpoint or '{{training.output}}')")
        if self.method in ("ngram", "suffix", "mtp") and self.model:
            raise ValueError(f"speculative method {self.method} takes no `model`")
        low, high = self.prompt_lookup_min, self.prompt_lookup_max
        if self.method != "ngram" and (low is not None or high is not None):
            raise ValueError("prompt_lookup_min/max apply to the ngram method only")
        if self.method != "suffix" and any(getattr(self, key) is not None for key in SUFFIX_KEYS):
            raise ValueError("suffix_decoding_* apply to the suffix method only")
        if low is not None and high is not None and low > high:
            raise ValueError("prompt_lookup_min must not exceed prompt_lookup_max")
        return self

    @property
    def needs_training(self) -> bool:
        return self.model == TRAINED_DRAFT
