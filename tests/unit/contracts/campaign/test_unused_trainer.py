"""A trainer on a campaign that trains nothing (issue 29, part 4).

Only a cell serving `{training.output}` makes a run train. A traffic campaign without such a cell needs
no `commands.train` (missing_inputs), and one that gives a trainer, the trainer's revision or a training
pre-approval anyway is refused naming each, all at once: nothing would read them. The target's revision
is then a provenance label, in the conditional inert table."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from contracts import inert
from contracts.campaign import Campaign, missing_inputs

EXAMPLE = Path(__file__).resolve().parents[4] / "infra/examples/campaign.yaml"


def _example() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def _untrained() -> dict:
    """The example campaign (traffic.path) without the cell that serves the trained draft."""
    data = _example()
    data["matrix"]["cells"] = [c for c in data["matrix"]["cells"]
                               if (c["serving"].get("speculative") or {}).get("model") != "{training.output}"]
    assert data["matrix"]["cells"] and "path" in data["traffic"]
    return data


def _without_trainer(data: dict) -> dict:
    del data["commands"]["train"]
    data.get("source_revisions", {}).pop("trainer", None)
    return data


def test_a_campaign_no_cell_of_which_needs_a_draft_needs_no_trainer():
    data = _without_trainer(_untrained())
    assert not [m for m in missing_inputs(data) if "commands.train" in m]
    campaign = Campaign.model_validate(data)
    assert campaign.commands.train is None and campaign.trains_nothing


def test_a_cell_serving_the_trained_draft_still_needs_the_trainer():
    data = _without_trainer(_example())
    assert [m for m in missing_inputs(data) if "commands.train" in m and "{training.output}" in m]
    with pytest.raises(ValidationError, match="commands.train"):
        Campaign.model_validate(data)


def test_a_trainer_no_cell_uses_is_refused_naming_it():
    with pytest.raises(ValidationError, match="commands.train"):
        Campaign.model_validate(_untrained())


def test_every_training_field_no_cell_uses_is_named_at_once():
    data = _untrained()
    data["commands"]["train"].update({"probe": ["python", "probe.py", "{training.output}"], "timeout_s": 60,
                                      "reuse": False})
    data["source_revisions"]["trainer"] = "trainer@v2"
    data["review"] = {"pre_approve": ["training", "bench"]}
    data["acknowledgements"]["i_understand_this_mutates_cluster"] = True
    with pytest.raises(ValidationError) as caught:
        Campaign.model_validate(data)
    text = str(caught.value)
    for field in ("commands.train (with probe, progress, reuse, timeout_s)", "source_revisions.trainer",
                  "review.pre_approve lists training"):
        assert field in text, text
    assert "no cell serves the draft this campaign trains" in text


@pytest.mark.parametrize("field", ["source_revisions.trainer", "review.pre_approve"])
def test_each_field_alone_is_refused(field):
    data = _without_trainer(_untrained())
    if field == "source_revisions.trainer":
        data["source_revisions"]["trainer"] = "trainer@v2"
    else:
        data["review"] = {"pre_approve": ["training"]}
        data["acknowledgements"]["i_understand_this_mutates_cluster"] = True
    with pytest.raises(ValidationError, match=field.replace(".", r"\.")):
        Campaign.model_validate(data)


def test_a_bench_pre_approval_stays_accepted():
    data = _without_trainer(_untrained())
    data["review"] = {"pre_approve": ["bench"]}
    data["acknowledgements"]["i_understand_this_mutates_cluster"] = True
    assert Campaign.model_validate(data).review.pre_approve == ["bench"]


def test_the_target_revision_is_recorded_inert_where_nothing_is_trained():
    data = _without_trainer(_untrained())
    data["source_revisions"]["target"] = "toy-target@v2"
    assert "source_revisions.target" in inert.inert_fields_set(Campaign.model_validate(data))
    trained = _example()
    trained["source_revisions"]["target"] = "toy-target@v2"
    assert "source_revisions.target" not in inert.inert_fields_set(Campaign.model_validate(trained))
