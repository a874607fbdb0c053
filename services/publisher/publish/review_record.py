"""The review point as the report records it: for each reviewed step's plan, what approved it.

`plan_reviews` reads that back from the journal with the services' own rules (`pre_approved`, `covers`),
so the report says what the services did; `with_views` adds each stored plan as `specdec <step> plan`
shows it, and `review_section` renders both."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from contracts.campaign import Campaign
from contracts.envelope import ArtifactRef
from contracts.events import BenchPlanned, RunApproved, TrainingPlanned
from contracts.layout import PLAN_PATHS
from services.publisher.report.document import Block, Formula, Paragraph, Section, Table
from services.publisher.report.model import CampaignData, PlanReview
from services.runtime.approval import covers, pre_approved
from services.runtime.bundle.bundle import BundleError, BundleStore
from services.shared.plan_view import plan_lines

PLANNED: dict[str, str] = {TrainingPlanned.SCHEMA: "training", BenchPlanned.SCHEMA: "bench"}
TITLE = "Review point: what approved each plan"


def plan_reviews(events: Iterable[Mapping[str, Any]], campaign: Campaign | None) -> list[PlanReview]:
    """Each announced plan once (a redelivered trigger announces the same sha256 again), in journal order.

    A plan the policy pre-approved ran at its trigger, whatever approvals follow; any other plan ran on
    the first approval that covers it (the services key a run.approved by the plan's sha256, so a later
    one runs nothing). Without a readable campaign the policy is unknown and counts as none."""
    events = list(events)
    approvals = []
    for event in events:
        if event.get("schema") == RunApproved.SCHEMA:
            try:
                approvals.append(RunApproved.model_validate(event))
            except ValidationError:
                continue  # not an approval the services would honour either
    found: list[PlanReview] = []
    seen: set[tuple[str, str]] = set()
    for event in events:
        step = PLANNED.get(str(event.get("schema", "")))
        try:
            plan = ArtifactRef.model_validate(event.get("plan"))
        except ValidationError:
            continue  # an announcement without a plan reference names nothing to approve
        if step is None or (step, plan.sha256) in seen:
            continue
        seen.add((step, plan.sha256))
        if campaign is not None and pre_approved(campaign, step):
            found.append(PlanReview(step=step, plan_uri=plan.uri, plan_sha256=plan.sha256, by="policy"))
            continue
        approval = next((a for a in approvals if covers(a, plan)), None)
        if approval is None:
            found.append(PlanReview(step=step, plan_uri=plan.uri, plan_sha256=plan.sha256, by="none"))
            continue
        found.append(PlanReview(step=step, plan_uri=plan.uri, plan_sha256=plan.sha256, by="approval",
                                approval_event_id=approval.event_id, approved_by=approval.approved_by,
                                approved_sha256s=list(approval.plan_sha256s)))
    return found


def with_views(bundle: BundleStore, run_id: str, reviews: list[PlanReview]) -> list[PlanReview]:
    """Each review with its plan's view, when the stored plan (hash-checked) is the one announced: a plan
    announced before a re-plan is shown by its hash only, never by the bytes that replaced it."""
    found: list[PlanReview] = []
    for review in reviews:
        path = PLAN_PATHS[review.step]
        try:
            stored = bundle.ref(run_id, path).sha256
            document = bundle.read_json(run_id, path)
        except BundleError:
            stored, document = None, None  # a plan that cannot be trusted is the bench plan's DRAFT reason
        if stored == review.plan_sha256 and isinstance(document, dict):
            review = review.model_copy(update={"view": plan_lines(review.step, document)})
        found.append(review)
    return found


def policy_line(campaign: Campaign | None) -> str:
    """The campaign's pre-approval policy in words, as the bundle's campaign.json states it."""
    if campaign is None:
        return "Pre-approval policy: unknown (no valid campaign.json in this bundle)."
    steps = campaign.review.pre_approve
    acknowledged = campaign.acknowledgements.i_understand_this_mutates_cluster
    if not steps:
        return (f"Pre-approval policy: none (review.pre_approve is empty; acknowledgements."
                f"i_understand_this_mutates_cluster is {str(acknowledged).lower()}): every plan waits for "
                "`specdec approve` naming its sha256.")
    # publish has no plan: the policy sends the final report live from the dry run recorded first.
    plans = [step for step in steps if step != "publish"]
    parts = []
    if plans:
        parts.append(f"review.pre_approve {', '.join(plans)}, with acknowledgements.i_understand_this_mutates_cluster "
                     "true: those steps' plans ran once stored and announced, without a separate approval")
    if "publish" in steps:
        parts.append("review.pre_approve publish, with acknowledgements.i_understand_this_publishes_externally true: "
                     "the final report goes to the external publish target from the dry run the publisher records "
                     "first, without a separate acknowledged call")
    return "Pre-approval policy: " + "; ".join(parts) + "."


def review_section(data: CampaignData) -> Section:
    intro = Paragraph((
        "Training and serving change the cluster: each plan was stored in the bundle (hashed) and announced "
        "before it could run, and runs only on an approval naming its sha256 or by the campaign's pre-approval "
        "policy. " + policy_line(data.campaign),
    ))
    if not data.reviews:
        return Section("review", TITLE, (intro, Paragraph(("No plan was announced in this run.",))))
    rows = tuple((r.step, r.plan_uri, r.plan_sha256, *_approved(r, data.run_id)) for r in data.reviews)
    blocks: list[Block] = [intro, Table(("step", "plan", "sha256", "approved by", "evidence"), rows,
                                        identity_column=False)]
    for review in data.reviews:
        if review.view:
            blocks += [Paragraph((f"The {review.step} plan (sha256 {review.plan_sha256[:12]}) as `specdec "
                                  f"{review.step} plan {data.run_id}` shows it: each command as launched, on one "
                                  "line:",)),
                       Formula(tuple(review.view))]
    return Section("review", TITLE, tuple(blocks))


def _approved(review: PlanReview, run_id: str) -> tuple[str, str]:
    if review.by == "policy":
        return ("the campaign's pre-approval policy",
                f"review.pre_approve lists {review.step} (with acknowledgements.i_understand_this_mutates_cluster)")
    if review.by == "approval":
        return (f"approval run.approved {review.approval_event_id} ({review.approved_by})",
                f"it named plan sha256 {', '.join(review.approved_sha256s)}")
    return ("none: the plan did not run",
            f"it waits for `specdec approve {run_id} --i-understand-this-mutates-cluster`")
