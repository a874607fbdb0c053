"""profile/SUFFIX_PREDICTION.json: suffix-decoding acceptance predicted offline, version 1.

The profiler writes it once the corpus is built (services/profiler/suffix_prediction.py), for every suffix
cell of the campaign: arctic-inference's own simulator replays the corpus's heldout prompts with their
reference completions through a suffix cache configured as the cell declares it (vLLM's defaults where it
does not), and counts what vLLM's spec-decode counters would count. The report sets it beside the served
acceptance (services/publisher/prediction/render_predict.py); the gate never reads it.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from contracts.envelope import Strict

SUFFIX_PREDICTION_VERSION: Final = 1

# vLLM's SpeculativeConfig defaults for the suffix keys (vllm/config/speculative.py, 0.32.0): what a cell that
# leaves one unset runs (the profiler simulates them; the report names the cache size).
SUFFIX_VLLM_DEFAULTS: dict[str, float] = {
    "suffix_decoding_max_tree_depth": 24, "suffix_decoding_max_cached_requests": 10000,
    "suffix_decoding_max_spec_factor": 1.0, "suffix_decoding_min_token_prob": 0.1}


class SuffixCellPrediction(Strict):
    """One suffix cell's predicted acceptance over the heldout split."""

    cell_id: str = Field(description="The suffix cell the prediction is for.")
    num_speculative_tokens: int = Field(ge=1, description="k: the most tokens a draft may have (the cell's).")
    max_tree_depth: int = Field(ge=1, description="suffix_decoding_max_tree_depth simulated (the cell's, else vLLM's).")
    max_cached_requests: int = Field(ge=0, description="suffix_decoding_max_cached_requests simulated.")
    max_spec_factor: float = Field(ge=0, description="suffix_decoding_max_spec_factor simulated.")
    min_token_prob: float = Field(ge=0, le=1, description="suffix_decoding_min_token_prob simulated.")
    requests: int = Field(ge=0, description="Heldout records replayed.")
    output_tokens: int = Field(ge=0, description="Reference completion tokens replayed.")
    steps: int = Field(ge=0, description="Decoding steps the replay took (one target forward each).")
    drafts: int = Field(ge=0, description="Steps with a non-empty draft (vllm:spec_decode_num_drafts).")
    draft_tokens: int = Field(ge=0, description="Tokens drafted (vllm:spec_decode_num_draft_tokens).")
    accepted_tokens: int = Field(ge=0, description="Drafted tokens the reference confirms (..._num_accepted_tokens).")
    acceptance_rate: float | None = Field(description="accepted / draft tokens; None without drafts.")
    mean_acceptance_length: float | None = Field(description="1 + accepted / drafts, as the report computes it "
                                                 "from served counters; None without drafts.")


class SuffixPrediction(Strict):
    """SUFFIX_PREDICTION.json: the prediction per suffix cell, or why there is none."""

    version: Literal[1] = Field(default=SUFFIX_PREDICTION_VERSION, description="Format version.")
    package: str | None = Field(description="arctic-inference==X that simulated; None when it could not be imported.")
    tokens: str | None = Field(description="How prompts and completions became tokens (the target's tokenizer and "
                               "chat template); None without a prediction.")
    cells: list[SuffixCellPrediction] = Field(description="One per suffix cell, in matrix order; empty without one.")
    unavailable_reason: str | None = Field(description="Why there is no prediction; None when `cells` holds it.")
