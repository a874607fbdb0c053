"""The rules of the review point (docs/design.md#the-review-point) that every reviewed step applies.

A plan runs only when an approval names its sha256 and its stored bytes still hash to it, or when the
campaign's `review.pre_approve` names the step (then a later approval runs nothing again). The
mechanism that applies them, plan -> announce -> execute, is review.py.
"""

from __future__ import annotations

from collections.abc import Callable

from contracts.campaign import Campaign
from contracts.envelope import ArtifactRef, Event
from contracts.events import RunApproved
from services.runtime.bundle.bundle import ArtifactMissing, BundleStore, InvalidPath


def pre_approved(campaign: Campaign, step: str) -> bool:
    """True when the campaign's policy runs `step`'s plan without a separate approval: the step is named in
    `review.pre_approve` and the campaign carries the typed acknowledgement (the contract refuses the one
    without the other; both are checked here so that neither alone ever executes a plan)."""
    return campaign.acknowledgements.i_understand_this_mutates_cluster and step in campaign.review.pre_approve


def covers(approval: RunApproved, plan: ArtifactRef) -> bool:
    """True when the approval names this plan's hash (and carries the typed acknowledgement)."""
    return approval.i_understand_this_mutates_cluster is True and plan.sha256 in approval.plan_sha256s


def stored_plan(bundle: BundleStore, run_id: str, path: str) -> ArtifactRef | None:
    """The ref of a service's stored plan, or None when it planned nothing for the run."""
    try:
        return bundle.ref(run_id, path)
    except (ArtifactMissing, InvalidPath):
        return None


def approval_step_key(bundle: BundleStore, plan_path: str) -> Callable[[Event], str]:
    """Step key of a run.approved route: the plan's sha256 when the approval covers it
    (one approval runs a plan once), else the event's own ID (an approval that does not
    cover the plan must not use up the plan's key)."""

    def key(event: Event) -> str:
        ref = stored_plan(bundle, event.run_id, plan_path)
        if ref is not None and isinstance(event, RunApproved) and covers(event, ref):
            return ref.sha256
        return f"not-covered-{event.event_id}"

    return key


def announced(bundle: BundleStore, run_id: str, schema: str, plan: ArtifactRef) -> bool:
    """True when the run's journal already holds a `schema` event naming this plan.

    A trigger redelivered after its first delivery announced the plan (and then
    died running it) must not announce the same plan twice. The journal may trail
    the streams by a moment: a delivery that died within that moment announces
    again, which a reader sees as the same plan sha256 twice, never as two plans."""
    return any(
        past.get("schema") == schema and (past.get("plan") or {}).get("sha256") == plan.sha256
        for past in bundle.events(run_id)
    )
