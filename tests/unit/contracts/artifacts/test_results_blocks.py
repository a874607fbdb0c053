"""contracts.artifacts.results: the blocks the bench-runner writes and the gate reads."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contracts import events
from contracts.artifacts.results import (
    COMPARED_IDENTITY_FIELDS,
    SPECDEC_KEYS,
    Evaluation,
    Parallelism,
    TrialIdentity,
    TrialResultBlocks,
    attach_blocks,
    read_blocks,
)
from contracts.campaign import ServingConfig
from services.gate.simulate import identity, spec_counters


def test_blocks_round_trip_through_a_vllm_result() -> None:
    blocks = TrialResultBlocks(
        identity=identity("standing", concurrency=2, trial=1), spec_decode=spec_counters(0.5, 2), evaluation=None
    )
    merged = attach_blocks({"completed": 10, "median_tpot_ms": 1.0}, blocks)
    assert merged["completed"] == 10 and set(SPECDEC_KEYS) - {"evaluation"} <= set(merged)
    assert read_blocks(merged) == blocks
    assert read_blocks({"completed": 10}) == TrialResultBlocks()


def test_spec_decode_block_is_the_event_contract() -> None:
    assert TrialResultBlocks.model_fields["spec_decode"].annotation == events.SpecDecodeDelta | None


def test_attach_refuses_to_overwrite_a_different_block() -> None:
    blocks = TrialResultBlocks(identity=identity("standing", concurrency=1, trial=0))
    merged = attach_blocks({}, blocks)
    assert attach_blocks(merged, blocks) == merged
    other = TrialResultBlocks(identity=identity("standing", concurrency=1, trial=1))
    with pytest.raises(ValueError, match="written once"):
        attach_blocks(merged, other)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"quantization": "fp8"}, "quantization"),
        ({"graph_mode": "graph"}, "graph_mode"),
        ({"parallelism": Parallelism(tensor_parallel_size=2)}, "tensor_parallel_size"),
        ({"trial": 3, "trial_count": 3}, "trial index"),
        ({"baseline_cell_id": "other"}, "standing cell has no baseline"),
        ({"role": "candidate"}, "names the standing cell"),
        ({"unknown_field": 1}, "Extra inputs"),
    ],
)
def test_identity_refuses_contradictions(overrides: dict, message: str) -> None:
    fields = identity("standing", concurrency=1, trial=0).model_dump()
    fields.update(overrides)
    with pytest.raises(ValidationError, match=message):
        TrialIdentity.model_validate(fields)


def test_compared_fields_leave_out_the_serving_config_and_names() -> None:
    assert "serving_config" not in COMPARED_IDENTITY_FIELDS
    a = identity("a", concurrency=1, trial=0, serving_config=ServingConfig(max_num_seqs=8))
    b = identity("b", concurrency=1, trial=2, trial_count=3)
    assert a.compared() == b.compared()
    assert identity("a", concurrency=1, trial=0, regime="cold").compared() != b.compared()


def test_evaluation_needs_a_figure() -> None:
    with pytest.raises(ValidationError, match="accuracy or agreement_rate"):
        Evaluation()
    assert Evaluation(accuracy=0.5, agreement_rate=0.9).score == 0.5
    assert Evaluation(agreement_rate=0.9).score == 0.9
