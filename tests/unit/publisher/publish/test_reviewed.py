"""Publishing reviewed (issue 29, part 6 of the issue).

A live external publish needs a call carrying the acknowledgement after a dry run of the same report, or
`publish` listed in `review.pre_approve`. The campaign-level `i_understand_this_publishes_externally`
alone makes the publisher service record a dry run and send nothing, and stands in contracts/inert.py's
conditional table there (warned on at submit, in inert.json)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from contracts import inert
from contracts.campaign import REVIEWED_STEPS, Campaign
from services.publisher.publish.publish_review import live_external
from services.publisher.publish.review_record import policy_line

EXAMPLE = Path(__file__).resolve().parents[4] / "infra/examples/campaign.yaml"
ACK = "acknowledgements.i_understand_this_publishes_externally"


def _campaign(target: str = "s3://bucket/prefix", *, ack: bool = True, pre_approve: list[str] | None = None) -> dict:
    data = yaml.safe_load(EXAMPLE.read_text())
    data["publish"]["target"] = target
    data["acknowledgements"]["i_understand_this_publishes_externally"] = ack
    if pre_approve is not None:
        data["review"] = {"pre_approve": pre_approve}
    return data


def test_the_campaign_acknowledgement_alone_publishes_nothing_live():
    live, why = live_external("some-run", "s3://bucket/prefix", acknowledged_by="campaign", draft=False,
                              override=None, reviewed="publish/dry-run/abc.json")
    assert not live, why
    assert "review.pre_approve" in why and "publish/dry-run/abc.json" in why
    assert ACK in inert.INERT_WHERE


def test_the_policy_publishes_a_final_report_live_from_its_dry_run_and_never_a_draft():
    live, why = live_external("some-run", "s3://bucket/prefix", acknowledged_by="policy", draft=False,
                              override=None, reviewed="publish/dry-run/abc.json")
    assert live and "review.pre_approve lists publish" in why
    live, why = live_external("some-run", "s3://bucket/prefix", acknowledged_by="policy", draft=True,
                              override=None, reviewed="publish/dry-run/abc.json")
    assert not live and "DRAFT" in why


@pytest.mark.parametrize("target", ["s3://bucket/prefix", "https://reports.example.com/up", "http://lake:8080/up"])
def test_the_acknowledgement_alone_is_recorded_inert_with_an_external_target(target):
    campaign = Campaign.model_validate(_campaign(target))
    assert ACK in inert.inert_fields_set(campaign)
    assert "review.pre_approve" in inert.inert_fields_set(campaign)[ACK]


def test_the_acknowledgement_is_consumed_with_the_policy_or_a_folder():
    with_policy = Campaign.model_validate(_campaign(pre_approve=["publish"]))
    assert with_policy.review.pre_approve == ["publish"]
    assert ACK not in inert.inert_fields_set(with_policy)
    folder = Campaign.model_validate(_campaign("file://published"))
    assert ACK not in inert.inert_fields_set(folder)  # the acknowledgement alone writes a folder


def test_the_publish_policy_needs_the_acknowledgement_and_an_external_target():
    with pytest.raises(ValidationError,
                       match="review.pre_approve lists publish.*i_understand_this_publishes_externally"):
        Campaign.model_validate(_campaign(ack=False, pre_approve=["publish"]))
    with pytest.raises(ValidationError, match="not external"):
        Campaign.model_validate(_campaign("file://published", pre_approve=["publish"]))


def test_the_publish_policy_needs_no_mutation_acknowledgement_and_plans_stay_training_and_bench():
    data = _campaign(pre_approve=["publish"])
    data["acknowledgements"]["i_understand_this_mutates_cluster"] = False
    campaign = Campaign.model_validate(data)
    assert "publish" not in REVIEWED_STEPS  # the review point never waits for a publish plan
    from services.runtime.approval import pre_approved

    assert not any(pre_approved(campaign, step) for step in REVIEWED_STEPS)
    assert "publish" in policy_line(campaign) and "mutates_cluster" not in policy_line(campaign)
