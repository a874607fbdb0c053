"""Where the prompts come from: representative traffic or named shapes, and the corpus drawn from traffic."""

from __future__ import annotations

from pydantic import Field

from contracts.envelope import Strict

# The label of prompts drawn from the corpus's heldout split (a campaign with traffic).
HELDOUT_SHAPE = "corpus-heldout"


class TrafficFile(Strict):
    """Representative traffic as JSONL (formats: docs/profiler.md)."""

    path: str = Field(min_length=1, description="Path of the traffic JSONL file.")
    reject_threshold: float = Field(
        default=0.05, ge=0, le=1, description="Share of malformed lines above which profiling fails."
    )


class TrafficShapes(Strict):
    """Named synthetic workload shapes instead of traffic; no corpus, no training."""

    shapes: list[str] = Field(
        min_length=1,
        description="Names of bundled workload shapes, every one profiled and benched: matrix.load.num_prompts is "
        "split across them in turn (prompt i from shape i mod n, the first shapes taking the remainder).",
    )


class CorpusSpec(Strict):
    """How the training corpus is drawn from the traffic."""

    size: int | None = Field(
        default=None, ge=1, description="Records to draw; None takes the largest set that still matches the profile."
    )
    heldout_share: float = Field(default=0.1, gt=0, lt=1, description="Share of records in the heldout split.")
    seed: int = Field(default=0, description="Seed of the stratified sampling and the split.")


def source_label(traffic: TrafficFile | TrafficShapes) -> str:
    """The workload shape the prompts are: the corpus's heldout split, or the listed shapes joined by '+'."""
    if isinstance(traffic, TrafficFile):
        return HELDOUT_SHAPE
    return "+".join(dict.fromkeys(traffic.shapes))
