"""The campaign workflow as an agent walks it: a run and its bundle, the campaign stored, a dry run, live.

evidence_init -> campaign_init -> campaign_run without the acknowledgement (a dry
run: the campaign is published so that the steps that change nothing run and
every plan is produced and stored; none executes) -> campaign_run with the typed
acknowledgement and the plans' sha256 (they run). The MCP server's tools are
these functions; `specdec submit` is the same three steps in a row (campaign/submit.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio

from contracts import layout
from contracts.campaign import REVIEWED_STEPS, Campaign
from contracts.catalogue import PLAN_PATHS
from contracts.events import CampaignSubmitted, RunApproved
from services.app.campaign import submit
from services.app.campaign.roots import FileRoots
from services.app.context import Session
from services.app.results import CampaignRunResult, CampaignStored, PlanView, RunCreated
from services.app.runs import ops
from services.app.runs.ops import Approved
from services.app.runs.progress import run_status
from services.app.runs.rounds_status import rounds_cost
from services.runtime.approval import pre_approved
from services.runtime.bundle.bundle import ArtifactMissing, BundleStore
from services.runtime.campaign import load_campaign
from services.runtime.errors import ConfigurationError
from services.shared.plan_view import plan_lines
from services.shared.secret_args import mask_document

_POLL_S = 0.5


async def evidence_init(session: Session, family: str, experiment_id: str | None) -> RunCreated:
    """Create a run and its empty evidence bundle; publishes nothing."""
    run_id = await submit.create_run(session, family, experiment_id)
    return RunCreated(run_id=run_id, bundle_path=str(session.bundle.run_dir(run_id).absolute()),
                      next_step=f"campaign_init(config=..., experiment_id={run_id!r}, family={family!r})",
                      happened=f"created run {run_id} and its empty evidence bundle; nothing published")


async def campaign_init(session: Session, config: Path, experiment_id: str, family: str, *,
                        evidence_bundle: Path | None, roots: FileRoots | None = None) -> CampaignStored:
    """Validate the campaign file (every problem at once, as submit) and store it, the operator's commands and
    the source revisions in the run's bundle; publishes nothing. `roots`: the folders the caller may read
    campaign, matrix and traffic files from (services/app/campaign/roots.py); None reads what it is given."""
    run_id = submit.check_run_id(experiment_id)
    if evidence_bundle is not None:
        check_bundle_path(session.settings.bundle_root, run_id, evidence_bundle)
    prepared = submit.prepare_campaign(config, roots)
    if prepared.campaign.family != family:
        raise ConfigurationError(f"the campaign {config} is of family {prepared.campaign.family!r}, not "
                                 f"{family!r}: give its own family, or the campaign meant for {family!r}")
    problems = submit.canonical_run_problems(prepared, run_id, session.settings.bundle_root)
    if problems:
        raise submit.CampaignRejected(config, problems)
    run_id = await submit.open_run(session, run_id)
    ref = submit.store_campaign(session.bundle, run_id, prepared)
    pre = [step for step in REVIEWED_STEPS if pre_approved(prepared.campaign, step)]
    bundle = session.bundle
    return CampaignStored(
        run_id=run_id, bundle_path=str(bundle.run_dir(run_id).absolute()), campaign=ref,
        artifacts=bundle.artifacts(run_id), inert=prepared.inert, pre_approved_steps=pre,
        next_step=f"campaign_run(run_id={run_id!r}) without the acknowledgement: a dry run that produces the plans",
    )


async def campaign_run(session: Session, run_id: str, *, acknowledged: bool, plan_sha256s: list[str] | None,
                       wait_for_plans_s: float) -> CampaignRunResult:
    """Dry run unless `acknowledged`: publish the stored campaign (once) and return its plans with their hashes,
    nothing executed, after waiting up to `wait_for_plans_s` for the first plan. With the acknowledgement:
    approve the named plans, which then run (or publish a campaign whose policy pre-approves its plans)."""
    bundle = session.bundle
    campaign = stored_campaign(bundle, run_id)
    pre = [step for step in REVIEWED_STEPS if pre_approved(campaign, step)]
    events = await ops.journal(session, run_id)
    submitted = any(e.get("schema") == CampaignSubmitted.SCHEMA for e in events)
    published, approval = False, None
    if not acknowledged:
        if pre:
            raise ConfigurationError(
                f"the campaign of run {run_id} pre-approves its {' and '.join(pre)} plan(s) (review.pre_approve): "
                "publishing it would run them, so a dry run cannot be honoured; remove review.pre_approve "
                "and store the campaign in a new run, or call campaign_run with "
                "i_understand_this_mutates_cluster=true")
        if plan_sha256s:
            raise ConfigurationError("plan_sha256s approves plans, which a dry run never does: drop them, or "
                                     "give i_understand_this_mutates_cluster=true")
        if not submitted:
            await submit.publish_submitted(session, run_id, campaign, bundle.ref(run_id, layout.CAMPAIGN))
            published = True
        events = await _wait_for_review(session, run_id, wait_for_plans_s)
    elif not submitted:
        if not pre:
            raise ConfigurationError(
                f"run {run_id} was not published yet, so it has no plan to approve: call campaign_run without "
                "i_understand_this_mutates_cluster first (a dry run); it returns the plans and their sha256")
        await submit.publish_submitted(session, run_id, campaign, bundle.ref(run_id, layout.CAMPAIGN))
        published = True
        events = await ops.journal(session, run_id)
    else:
        approval = await ops.approve_plans(session, run_id, plan_sha256s or [], acknowledged=True)
        events = await ops.journal(session, run_id)
    plans = plans_of(bundle, run_id, events)
    result = _run_result(run_id, acknowledged=acknowledged, published=published, approval=approval, plans=plans,
                         pre=pre, events=events)
    # The cost before approval: a sequential plan's expected trials per arm (services/app/runs/rounds_status.py).
    return result.model_copy(
        update={"status": result.status.model_copy(update={"rounds": rounds_cost(bundle, run_id)})}
    )


def _run_result(run_id: str, *, acknowledged: bool, published: bool, approval: Approved | None,
                plans: list[PlanView], pre: list[str], events: list[dict[str, Any]]) -> CampaignRunResult:
    waiting = [p for p in plans if not p.approved and p.step not in pre]
    next_step = (f"review the plans, then campaign_run(run_id={run_id!r}, i_understand_this_mutates_cluster=true, "
                 f"plan_sha256s=[...]) to run them" if waiting else f"campaign_status(run_id={run_id!r})")
    return CampaignRunResult(
        run_id=run_id, dry_run=not acknowledged, published_submission=published,
        approved_sha256s=approval.plan_sha256s if approval else [],
        approval_event_id=approval.event_id if approval else None, plans=plans,
        status=run_status(run_id, events), next_step=next_step,
    )


def stored_campaign(bundle: BundleStore, run_id: str) -> Campaign:
    """The campaign a run holds; refused, saying how to store one, when it holds none."""
    submit.check_run_id(run_id)
    try:
        bundle.ref(run_id, layout.CAMPAIGN)
    except ArtifactMissing:
        raise ConfigurationError(f"run {run_id} holds no campaign: store one with campaign_init first") from None
    return load_campaign(bundle, run_id)


def plans_of(bundle: BundleStore, run_id: str, events: list[dict[str, Any]]) -> list[PlanView]:
    """Every plan the run's events announced, in order, each once, with whether an approval names it."""
    approved = {sha for e in events if e.get("schema") == RunApproved.SCHEMA for sha in e.get("plan_sha256s", [])}
    views: dict[str, PlanView] = {}  # by hash: a redelivered trigger may announce one plan twice
    for event in sorted((e for e in events if e.get("schema") in ops.PLANNED), key=lambda e: str(e.get("produced_at"))):
        step, sha = event["schema"].split(".")[0], event["plan"]["sha256"]
        # Hash-checked (a changed plan is refused), then masked as every copy made for a reader is.
        document = mask_document(bundle.read_json(run_id, PLAN_PATHS[step]))
        views.setdefault(sha, PlanView(step=step, event_id=event["event_id"], uri=event["plan"]["uri"], sha256=sha,
                                       approved=sha in approved, document=document,
                                       text="\n".join(plan_lines(step, document)) + "\n"))
    return list(views.values())


async def _wait_for_review(session: Session, run_id: str, wait_s: float) -> list[dict[str, Any]]:
    """The run's events once a plan waits for approval or the run halted, or after `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        events = await ops.journal(session, run_id)
        state = run_status(run_id, events)
        stopped = state.halted or any(s.state == "unavailable" for s in state.steps)
        if ops.pending_plans(events) or stopped or time.monotonic() >= deadline:
            return events
        await anyio.sleep(_POLL_S)


def check_bundle_path(bundle_root: Path, run_id: str, given: Path) -> None:
    """A caller-named bundle folder must be the run's own folder under the services' bundle root."""
    root = bundle_root.absolute().resolve()
    path = given.absolute().resolve()
    if not path.is_relative_to(root):
        raise ConfigurationError(f"evidence_bundle {given} is not under the services' bundle root {root} "
                                 "(SPECDEC_BUNDLE_ROOT): the services read and write bundles there only; leave it out, "
                                 f"or give {root / run_id}")
    if path != root / run_id:
        raise ConfigurationError(f"evidence_bundle {given} is not the bundle of run {run_id}, which is {root / run_id}")
