"""Each workflow verb run from its parsed `args` and typed acknowledgement (services/app/workflow/verbs.py).

The same use cases as the typed tools and the CLI; the workflow adds its call shape and results in its
own words. The live `perf_tune_report_campaign_run` approves exactly the plans the preceding dry run
returned (recorded in the bundle) that still wait (docs/mcp.md#the-workflow-document-call-by-call).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from contracts import layout
from services.app.campaign.roots import FileRoots
from services.app.context import Session
from services.app.results import RunCreated
from services.app.runs import ops, report
from services.app.workflow import verbs, workflow
from services.app.workflow.verbs import ArgsRefused, VerbResult
from services.runtime.bundle.bundle import ArtifactMissing

DRY_RUN_WAIT_S = 60.0


async def evidence_init(session: Session, args: argparse.Namespace) -> RunCreated:
    created = await workflow.evidence_init(session, args.family, args.run_id)
    assert created.run_id is not None  # a created run has its ID
    if args.intent:
        session.bundle.write_json(created.run_id, layout.INTENT, {"intent": args.intent, "family": args.family})
        session.bundle.rebuild_manifest(created.run_id)
    return created.model_copy(update={
        "happened": f"created run {created.run_id} and its evidence bundle" + (", with the intent" if args.intent
                                                                                 else ""),
        "next_step": f"{verbs.CAMPAIGN_INIT} with args --config <matrix.yaml> --experiment-id {created.run_id} "
                     f"--family {args.family} --evidence-bundle {created.bundle_path}"})


async def campaign_init(session: Session, args: argparse.Namespace, roots: FileRoots | None = None) -> VerbResult:
    bundle = Path(args.evidence_bundle) if args.evidence_bundle else None
    stored = await workflow.campaign_init(session, Path(args.config), args.experiment_id, args.family,
                                            evidence_bundle=bundle, roots=roots)
    inert = f"; accepted but inert: {', '.join(stored.inert)}" if stored.inert else ""
    return VerbResult(
        verb=verbs.CAMPAIGN_INIT, run_id=stored.run_id, bundle=stored.bundle_path,
        happened=f"validated {args.config} and stored it, the operator's commands and source revisions in the bundle "
                 f"({len(stored.artifacts)} artifacts, hashed); nothing published{inert}",
        next_step=f"{verbs.CAMPAIGN_RUN} with args --config {args.config} --campaign {stored.run_id} --dry-run, "
                  "then inspect placement, deployment changes, workload shape, warmup and cleanup")


async def campaign_run(session: Session, args: argparse.Namespace, *, acknowledged: bool,
                       roots: FileRoots | None = None) -> VerbResult:
    run_id = verbs.resolve_run(args.campaign, session.settings.bundle_root)
    verbs.same_config(session.settings.bundle_root, run_id, Path(args.config), roots)
    if acknowledged and args.dry_run:
        raise ArgsRefused(f"{verbs.CAMPAIGN_RUN}: --dry-run and i_understand_this_mutates_cluster=true contradict "
                          "each other: drop --dry-run to go live, or the acknowledgement to dry-run (nothing was done)")
    bundle = str(session.bundle.run_dir(run_id).absolute())
    if not acknowledged:
        result = await workflow.campaign_run(session, run_id, acknowledged=False, plan_sha256s=None,
                                             wait_for_plans_s=DRY_RUN_WAIT_S)
        waiting = [p.sha256 for p in result.plans if not p.approved]
        _record_dry_run(session, run_id, waiting)
        plans = [p.model_dump(mode="json") for p in result.plans]
        return VerbResult(
            verb=verbs.CAMPAIGN_RUN, run_id=run_id, bundle=bundle, dry_run=True, plans=plans,
            happened=(("published the campaign; " if result.published_submission else "")
                      + f"{len(waiting)} plan(s) wait for review: nothing executed"),
            next_step=(f"inspect each plan's placement, deployment changes, workload shape, warmup and cleanup, then "
                       f"{verbs.CAMPAIGN_RUN} live with the structured field i_understand_this_mutates_cluster: true"
                       if waiting else f"no plan waits yet: call {verbs.CAMPAIGN_RUN} --dry-run again shortly"))
    reviewed = _last_dry_run(session, run_id)
    pending = {p["plan"]["sha256"] for p in ops.pending_plans(await ops.journal(session, run_id))}
    approve = [sha for sha in reviewed if sha in pending]
    if not approve:
        raise ArgsRefused(f"{verbs.CAMPAIGN_RUN}: run {run_id} has no plan that its last dry run returned and that "
                          f"still waits: call {verbs.CAMPAIGN_RUN} with --dry-run first and review what it returns "
                          "(nothing was done)")
    result = await workflow.campaign_run(session, run_id, acknowledged=True, plan_sha256s=approve,
                                         wait_for_plans_s=0.0)
    return VerbResult(
        verb=verbs.CAMPAIGN_RUN, run_id=run_id, bundle=bundle, dry_run=False, approved_sha256s=result.approved_sha256s,
        plans=[p.model_dump(mode="json") for p in result.plans],
        happened=f"approved the {len(result.approved_sha256s)} plan(s) the dry run returned; the services run them",
        next_step="gate the result: watch campaign_status until the gate decides and the report is rendered; a plan "
                  "produced later (the bench plan follows training) needs another "
                  f"{verbs.CAMPAIGN_RUN} --dry-run, then live; then {verbs.PUBLISH} as a dry run")


async def publish(session: Session, args: argparse.Namespace, *, acknowledged: bool) -> VerbResult:
    from services.publisher.publish.outbox import DraftOverride

    run_id = verbs.resolve_run(args.campaign, session.settings.bundle_root)
    if acknowledged and args.dry_run:
        raise ArgsRefused(f"{verbs.PUBLISH}: --dry-run and i_understand_this_publishes_externally=true contradict each "
                          "other: drop one (nothing was done)")
    override = DraftOverride(reason=args.publish_draft) if args.publish_draft else None
    done = await report.publish(session.bundle, session.settings, run_id, target=args.target,
                                acknowledged_by="mcp" if acknowledged else None, draft_override=override)
    sent = "would send" if done.dry_run else "sent"
    return VerbResult(
        verb=verbs.PUBLISH, run_id=run_id, bundle=str(session.bundle.run_dir(run_id).absolute()), dry_run=done.dry_run,
        publication=done.model_dump(mode="json"),
        happened=f"{sent} {len(done.files)} report file(s) and {len(done.evidence)} evidence file(s) to "
                 f"{done.destination}" + (" (a DRAFT report)" if done.draft else ""),
        next_step=(f"review what would be sent, then {verbs.PUBLISH} live with the structured field "
                   "i_understand_this_publishes_externally: true" if done.dry_run
                   else "done: end with the next measured lever and the gate that can prove or reject it (the report's "
                        "last section)"))


def _record_dry_run(session: Session, run_id: str, waiting: list[str]) -> None:
    n = len(_dry_runs(session, run_id)) + 1
    session.bundle.write_json(run_id, layout.workflow_dry_run(n), {"plan_sha256s": waiting})
    session.bundle.rebuild_manifest(run_id)


def _dry_runs(session: Session, run_id: str) -> list[str]:
    folder = session.bundle.run_dir(run_id) / layout.WORKFLOW
    return (
        sorted((p.name for p in folder.glob("dry-run-*.json")), key=lambda n: int(n[8:-5])) if folder.is_dir() else []
    )


def _last_dry_run(session: Session, run_id: str) -> list[str]:
    names = _dry_runs(session, run_id)
    if not names:
        return []
    try:
        return list(session.bundle.read_json(run_id, f"{layout.WORKFLOW}/{names[-1]}")["plan_sha256s"])
    except ArtifactMissing:
        return []
