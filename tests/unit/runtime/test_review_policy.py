"""The campaign's pre-approval policy (`review.pre_approve`): typed, refused without the
acknowledgement, per step; and the acknowledgement alone executes nothing.

The mechanism itself runs in tests/unit/runtime/test_review.py (a stand-in step) and
tests/integration/test_bench_service.py, test_trainer_proxy.py (the real services);
here: the contract, `pre_approved`, `specdec <step> plan`'s wording and the report's record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from contracts import layout
from contracts.campaign import REVIEWED_STEPS, Campaign, ReviewPolicy
from contracts.envelope import ArtifactRef
from contracts.events import BenchPlanned, RunApproved, TrainingPlanned
from services.app.runs.plans import describe, show_plan
from services.publisher.publish.review_record import plan_reviews
from services.publisher.report.model import PlanReview
from services.runtime.approval import pre_approved
from services.runtime.bundle.bundle import BundleStore

ROOT = Path(__file__).resolve().parents[3]
RUN = "toy-20261201-020202-abcdef"


def raw(*, acknowledged: bool, pre_approve: list[str] | None = None, shapes: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["acknowledgements"]["i_understand_this_mutates_cluster"] = acknowledged
    if pre_approve is not None:
        data["review"] = {"pre_approve": pre_approve}
    if shapes:
        data["traffic"] = {"shapes": ["short"]}
        data["commands"].pop("train")
        data["source_revisions"].pop("trainer")
        data["matrix"]["cells"] = [c for c in data["matrix"]["cells"] if c["cell_id"] != "draft-k3"]
    return data


def test_the_documented_example_states_no_policy_so_every_plan_waits() -> None:
    campaign = Campaign.model_validate(raw(acknowledged=False))
    assert campaign.review.pre_approve == []
    assert ReviewPolicy().pre_approve == [], "the default is no pre-approval"


@pytest.mark.parametrize("step", REVIEWED_STEPS)
def test_the_acknowledgement_alone_pre_approves_no_step(step: str) -> None:
    campaign = Campaign.model_validate(raw(acknowledged=True))
    assert pre_approved(campaign, step) is False


def test_a_policy_naming_one_step_pre_approves_only_that_step() -> None:
    campaign = Campaign.model_validate(raw(acknowledged=True, pre_approve=["bench"]))
    assert pre_approved(campaign, "bench") is True and pre_approved(campaign, "training") is False
    both = Campaign.model_validate(raw(acknowledged=True, pre_approve=["training", "bench"]))
    assert all(pre_approved(both, step) for step in REVIEWED_STEPS)


def test_a_policy_without_the_acknowledgement_is_refused_saying_what_to_do() -> None:
    with pytest.raises(ValidationError) as refused:
        Campaign.model_validate(raw(acknowledged=False, pre_approve=["training"]))
    message = str(refused.value)
    assert "review.pre_approve" in message and "acknowledgements.i_understand_this_mutates_cluster: true" in message
    assert "specdec approve RUN_ID --i-understand-this-mutates-cluster" in message


@pytest.mark.parametrize("bad, named", [
    (["bench", "bench"], "repeats bench"),
    (["serve"], "pre_approve"),  # not a reviewed step
])
def test_a_policy_names_each_reviewed_step_once(bad: list[str], named: str) -> None:
    with pytest.raises(ValidationError, match=named):
        Campaign.model_validate(raw(acknowledged=True, pre_approve=bad))


def test_a_shapes_campaign_refuses_to_pre_approve_training_it_never_plans() -> None:
    with pytest.raises(ValidationError, match="review.pre_approve lists training, but traffic is named shapes"):
        Campaign.model_validate(raw(acknowledged=True, pre_approve=["training", "bench"], shapes=True))
    assert Campaign.model_validate(raw(acknowledged=True, pre_approve=["bench"], shapes=True)).review.pre_approve == [
        "bench"
    ]


@pytest.mark.parametrize("name", ["toy-campaign.yaml", "demo-campaign.yaml"])
def test_the_shipped_local_campaigns_pre_approve_both_steps_explicitly(name: str) -> None:
    campaign = Campaign.model_validate(yaml.safe_load((ROOT / "infra/examples" / name).read_text()))
    assert campaign.review.pre_approve == ["training", "bench"]
    assert campaign.acknowledgements.i_understand_this_mutates_cluster is True


# --- `specdec <step> plan` -----------------------------------------------------------


def _bundle_with_plan(tmp_path: Path, campaign: Campaign) -> tuple[BundleStore, ArtifactRef]:
    bundle = BundleStore(tmp_path)
    bundle.write_json(RUN, layout.CAMPAIGN, campaign)
    return bundle, bundle.write_json(RUN, layout.BENCH_PLAN, {"cells": ["standing"]})


def test_the_plan_command_says_an_acknowledged_campaign_without_a_policy_waits_for_an_approval(tmp_path: Path) -> None:
    bundle, _ = _bundle_with_plan(tmp_path, Campaign.model_validate(raw(acknowledged=True)))
    text = describe(show_plan(bundle, "bench", RUN))
    assert f"approval: none yet; run `specdec approve {RUN} --i-understand-this-mutates-cluster`" in text


def test_the_plan_command_names_the_policy_only_for_the_step_it_lists(tmp_path: Path) -> None:
    bundle, _ = _bundle_with_plan(tmp_path, Campaign.model_validate(raw(acknowledged=True, pre_approve=["bench"])))
    text = describe(show_plan(bundle, "bench", RUN))
    assert "pre-approved by the campaign's policy (review.pre_approve lists bench" in text
    bundle.write_json(RUN, layout.TRAINING_PLAN, {"argv": ["python", "train.py"]})
    text = describe(show_plan(bundle, "training", RUN))
    assert "none yet" in text and "pre-approved" not in text


# --- the report's record ----------------------------------------------------------------


def _ref(step: str, char: str) -> ArtifactRef:
    return ArtifactRef(uri=f"bundle://{RUN}/{step}/plan.json", sha256=char * 64, size_bytes=10)


def _journal(*events: Any) -> list[dict[str, Any]]:
    return [event.model_dump(mode="json", by_alias=True) for event in events]


def test_the_report_names_the_approval_that_ran_each_plan_or_the_policy() -> None:
    training, bench = _ref("training", "a"), _ref("bench", "b")
    other = RunApproved(run_id=RUN, producer="cli/t", i_understand_this_mutates_cluster=True,
                        plan_sha256s=["c" * 64], approved_by="ops@host")
    first = RunApproved(run_id=RUN, producer="cli/t", i_understand_this_mutates_cluster=True,
                        plan_sha256s=[training.sha256], approved_by="ops@host")
    later = RunApproved(run_id=RUN, producer="cli/t", i_understand_this_mutates_cluster=True,
                        plan_sha256s=[training.sha256], approved_by="other@host")
    events = _journal(
        TrainingPlanned(run_id=RUN, producer="trainer-proxy/t", plan=training, executor="local", node="n1"),
        TrainingPlanned(
            run_id=RUN, producer="trainer-proxy/t", plan=training, executor="local", node="n1"
        ),  # redelivery
        other,
        first,
        later,
        BenchPlanned(run_id=RUN, producer="bench-runner/t", plan=bench, cells=["standing"], trials=3),
    )
    campaign = Campaign.model_validate(raw(acknowledged=True, pre_approve=["bench"]))
    assert plan_reviews(events, campaign) == [
        PlanReview(step="training", plan_uri=training.uri, plan_sha256=training.sha256, by="approval",
                   approval_event_id=first.event_id, approved_by="ops@host", approved_sha256s=[training.sha256]),
        PlanReview(step="bench", plan_uri=bench.uri, plan_sha256=bench.sha256, by="policy"),
    ]
    # The acknowledgement alone: nothing approved the bench plan, so it did not run.
    alone = Campaign.model_validate(raw(acknowledged=True))
    assert [r.by for r in plan_reviews(events, alone)] == ["approval", "none"]
    # Without a readable campaign the policy is unknown: only approvals count.
    assert [r.by for r in plan_reviews(events, None)] == ["approval", "none"]
