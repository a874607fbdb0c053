"""The bench plan: every command that would run, where, in what order, and the
cleanup — stored in the bundle, hashed, and executed only once approved.

The model only (`BenchPlan`, over its parts in plan_types.py); services/bench/planning/plan.py
builds it from the campaign, the matrix and what earlier steps produced.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from contracts.campaign import LoadSpec
from contracts.envelope import RunId, Strict
from services.bench.planning.interleave import REGIME as INTERLEAVED
from services.bench.planning.plan_types import Block, CellPlan, Launch, Rounds

PLAN_VERSION = 1


class BenchPlan(Strict):
    """Everything the bench step would do; its sha256 is what an approval names."""

    version: Literal[1] = Field(default=PLAN_VERSION, description="Plan format version.")
    run_id: RunId = Field(description="The run; also the experiment label of every process started.")
    executor: Literal["local", "slurm", "kubernetes"] = Field(description="Where servers run.")
    cells: list[CellPlan] = Field(min_length=1, description="Every cell, standing first.")
    launches: list[Launch] = Field(
        description="Server starts in order (cold regimes interleave cells across trials; warm-interleaved servers "
        "are all started, in this order, before the first block).")
    blocks: list[Block] | None = Field(
        default=None,
        description="warm-interleaved plans only: the order the trials run in, block b measuring trial b of each "
        "cell in `order` on the servers kept up; absent from other plans.")
    load: LoadSpec = Field(description="The measured load, the same for every cell.")
    prompts: dict[str, Any] = Field(description="Where prompts come from: corpus heldout split (uri, sha256) or shapes.")
    warmup: str = Field(description="What runs before each measured window, in words.")
    deployment_changes: list[str] = Field(description="Every change to the cluster the plan makes.")
    cleanup: list[str] = Field(description="What cleanup does, selected by the experiment label only.")
    draft: bool = Field(description="True for an exploratory matrix (matrix.exploratory): every result is DRAFT.")
    readiness_timeout_s: float = Field(description="How long a server may take to answer /health.")
    rounds: Rounds | None = Field(
        default=None,
        description="Sequential rounds (gate.max_trials): every cell runs `trials` (the minimum), then one more "
        "trial per arm and level each block until the stopping rule says every level is decided, or "
        "`rounds.max_trials`; the blocks and launches cover the cap. Absent from a fixed-trial plan.")

    @model_validator(mode="after")
    def _check_blocks(self) -> BenchPlan:
        # Read back before execution: a warm-interleaved plan without its order would start every
        # server and measure nothing.
        if any(cell.regime == INTERLEAVED for cell in self.cells) != (self.blocks is not None):
            raise ValueError("a bench plan records `blocks` exactly when its cells are warm-interleaved; "
                             "re-plan the bench step (specdec request bench RUN_ID)")
        return self

    @model_serializer(mode="wrap")
    def _without_absent_blocks(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A plan without warm-interleaved cells serialises (and hashes, and is approved) byte for
        # byte as before `blocks` existed.
        data = handler(self)
        for name in ("blocks", "rounds"):  # a fixed-trial plan hashes as before `rounds` existed too
            if data.get(name) is None:
                data.pop(name, None)
        return data

    @property
    def cap(self) -> int | None:
        """The most trials per arm and level the plan may run (sequential rounds); None for fixed trials."""
        return self.rounds.max_trials if self.rounds is not None else None
