"""step.progress (contracts/progress.py): strict, every field described, versioned, and outside the catalogue."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contracts.catalogue import BY_SCHEMA, PROGRESS_PRODUCERS, STEP_OWNER, consumed_by
from contracts.progress import StepProgress
from contracts.streams import PROGRESS_SCHEMA

SAMPLE = {"run_id": "run-1", "producer": "trainer-proxy/a", "step": "training", "done": 3, "total": 10,
          "unit": "step", "loss": 1.25, "eta_s": 14.0, "elapsed_s": 6.0}


def test_every_field_is_described_and_an_unknown_one_refused():
    assert all((field.description or "").strip() for field in StepProgress.model_fields.values())
    with pytest.raises(ValidationError, match="extra"):
        StepProgress(**SAMPLE, surprise=1)


def test_its_schema_and_version_are_pinned_and_it_round_trips():
    event = StepProgress(**SAMPLE)
    assert (event.schema_, event.version) == (PROGRESS_SCHEMA, 1)
    assert StepProgress.model_validate_json(event.to_json()) == event
    with pytest.raises(ValidationError):
        StepProgress(**SAMPLE, version=2)


@pytest.mark.parametrize("bad", [{"done": -1}, {"total": 0}, {"loss": float("nan")}, {"eta_s": -1.0},
                                 {"step": "gate"}, {"unit": "epoch"}])
def test_impossible_figures_are_refused(bad):
    with pytest.raises(ValidationError):
        StepProgress(**{**SAMPLE, **bad})


def test_progress_is_not_evidence_no_group_reads_it_and_each_step_owner_produces_its_own():
    assert PROGRESS_SCHEMA not in BY_SCHEMA
    assert all(spec.schema != PROGRESS_SCHEMA for spec in consumed_by("journal"))
    assert PROGRESS_PRODUCERS == {"training": "trainer-proxy", "bench": "bench-runner"}
    assert all(STEP_OWNER[step] == owner for step, owner in PROGRESS_PRODUCERS.items())
