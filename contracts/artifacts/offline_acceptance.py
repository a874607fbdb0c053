"""training/output/offline-acceptance.json: a trained draft's acceptance estimated before serving, format 1.

An operator's trainer may write it into its output folder, so the trainer-proxy hashes it into
training/outputs.json with the checkpoint (both example trainers do, with --heldout: infra/examples/
offline_acceptance.py, methods eagle3 and draft_model). Teacher-forced on the held-out split against
the target's greedy tokens: position j counts as accepted where drafts 1..j all equal the target's next tokens, so
`accepted_per_position[j-1] / drafts` is what the report calls a_j for a served arm (vLLM's
accepted-per-position counter over its drafts), not the conditional p_j of its acceptance table.

The report sets it beside the served per-position acceptance, with the error
(services/publisher). The gate never reads it: training metrics cannot authorise promotion.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from contracts.envelope import Strict

# The file's name inside the trainer's output folder (layout.TRAINING_OUTPUT_DIR), as the trainer writes it.
OFFLINE_ACCEPTANCE_FILE = "offline-acceptance.json"


class OfflineAcceptance(Strict):
    """A trained draft's per-position acceptance estimated offline on the held-out split."""

    format: Literal[1] = Field(description="Format version.")
    method: str = Field(description="The speculative method the draft is for (eagle3, draft_model).")
    definition: str = Field(description="How the trainer counted, in words.")
    heldout_prompts: int = Field(ge=0, description="Held-out prompts read.")
    prompts_too_long: int = Field(ge=0, description="Held-out prompts left out: too long for the target's context.")
    answers: int = Field(ge=0, description="Target answers the estimate drafted against.")
    drafts: int = Field(ge=0, description="Answer positions drafted from (the denominator of every position).")
    accepted_per_position: list[int] = Field(
        description="Per draft position j = 1..k, the positions whose drafts 1..j all equal the target's tokens.")
    per_position_acceptance: list[float] = Field(
        description="accepted_per_position / drafts, as the trainer rounded it."
    )
    num_speculative_tokens: int = Field(ge=1, description="k: draft positions estimated.")
    acceptance_length: float = Field(
        ge=1, description="1 + the sum of per_position_acceptance, as the trainer rounded it."
    )
    acceptance_rate: float = Field(ge=0, le=1, description="Accepted over drafted tokens (drafts x k).")
    max_new_tokens: int = Field(ge=1, description="Length cap of the target's greedy answers.")

    @model_validator(mode="after")
    def _consistent(self) -> OfflineAcceptance:
        k = self.num_speculative_tokens
        if len(self.accepted_per_position) != k or len(self.per_position_acceptance) != k:
            raise ValueError(f"accepted_per_position and per_position_acceptance must both have "
                             f"num_speculative_tokens ({k}) entries")
        if any(n < 0 or n > self.drafts for n in self.accepted_per_position):
            raise ValueError(f"every accepted_per_position entry must lie in 0..drafts ({self.drafts})")
        return self

    def a(self) -> list[float] | None:
        """a_j = accepted at j / drafts from the counts (not the rounded shares); None without drafts."""
        return [n / self.drafts for n in self.accepted_per_position] if self.drafts else None
