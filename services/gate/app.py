"""Gate entrypoint: bench.completed / gate.requested -> gate/DECISION.json and gate.decided.

Reads the run's trial results (those bench.completed names, or every result file for gate.requested) and
decides with the campaign's gate spec and cap; rejected trials never count. A `continue` fails the step
(`final`: NotFinal) rather than write DECISION.json or emit gate.decided, so it never reaches the report
(docs/gate.md#sequential-rounds, docs/gate.md#rejected-trials)."""

from __future__ import annotations

from pathlib import Path

from contracts import layout
from contracts.artifacts.decision import Decision
from contracts.campaign import Campaign, Matrix
from contracts.catalogue import GATE
from contracts.envelope import Event
from contracts.events import BenchCompleted, GateDecided
from services.gate import decide, load_trials, split_by_role
from services.gate.results import load_rejected
from services.runtime.bundle.bundle import BundleStore
from services.runtime.campaign import load_campaign
from services.runtime.delivery.route import Route, StepContext
from services.runtime.delivery.upstream import latest
from services.runtime.errors import StepFailed
from services.runtime.resources import Resources
from services.shared.results import rejected_files, result_files

NAME = GATE


def result_paths(bundle: BundleStore, event: Event) -> list[Path]:
    if isinstance(event, BenchCompleted):
        return [bundle.resolve(ref.uri) for ref in event.results]
    return result_files(bundle, event.run_id)


def gate_run(bundle: BundleStore, event: Event, producer: str) -> GateDecided:
    campaign = load_campaign(bundle, event.run_id)
    paths = result_paths(bundle, event)
    if not paths:
        raise StepFailed(f"run {event.run_id} has no trial results in its bundle to gate", error_type="NoResults")
    baseline, candidates = split_by_role(load_trials(paths))
    rejected = load_rejected(rejected_files(bundle, event.run_id))
    for r in rejected:
        ident = r.trial.identity if r.trial is not None else None
        if ident is not None and ident.role == "candidate":
            candidates.setdefault(ident.cell_id, [])  # decided, on its counted trials (perhaps none)
    if not candidates:
        raise StepFailed(_no_candidates(event), error_type="NoCandidates")
    completed = event if isinstance(event, BenchCompleted) else latest(bundle, event.run_id, BenchCompleted)
    failed = dict(completed.failed_cells) if completed is not None else {}
    decision = final(decide(baseline, candidates, campaign.gate, max_model_len=campaign.target.max_model_len,
                            rejected=rejected, max_trials=campaign.gate.max_trials, failed_cells=failed))
    if _exploratory(bundle, event, campaign):
        decision = decision.model_copy(update={"draft": True, "reasons": [
            decision.reasons[0], "DRAFT: the trials come from an exploratory matrix (matrix.exploratory: true); "
            "this decision is not evidence for promotion", *decision.reasons[1:]]})
    ref = bundle.write_bytes(event.run_id, layout.DECISION, decision.model_dump_json(indent=2).encode() + b"\n")
    return event.caused(
        GateDecided, producer=producer, decision=decision.decision, winner=decision.winner,
        decision_ref=ref, reasons=list(decision.reasons) or [f"decision: {decision.decision}"],
    )


def final(decision: Decision) -> Decision:
    """The decision, refused when it is `continue`: the gate step reports only final decisions."""
    if decision.decision == "continue":
        raise StepFailed(
            f"the gate decided `continue`, which the gate step never reports ({decision.reasons[0]}): sequential "
            "rounds belong to the bench-runner, whose bench.completed gates the run once its rounds have stopped",
            error_type="NotFinal",
        )
    return decision


def _exploratory(bundle: BundleStore, event: Event, campaign: Campaign) -> bool:
    """Whether the trials were measured as a DRAFT: bench.completed says so (the trigger,
    else the run's latest), or the stored campaign's matrix is exploratory."""
    completed = event if isinstance(event, BenchCompleted) else latest(bundle, event.run_id, BenchCompleted)
    if completed is not None and completed.draft:
        return True
    return isinstance(campaign.matrix, Matrix) and campaign.matrix.exploratory


def _no_candidates(event: Event) -> str:
    failed = event.failed_cells if isinstance(event, BenchCompleted) else {}
    if failed:
        why = "; ".join(f"{cell}: {reason[:500]}" for cell, reason in failed.items())
        return f"every candidate cell failed in the bench, so there is nothing to compare with the standing cell: {why}"
    return "the bench produced no candidate trial results: add a candidate cell to the matrix"


def routes(resources: Resources) -> list[Route]:
    bundle = resources.bundle

    async def handle(event: Event, ctx: StepContext) -> list[Event]:
        return [gate_run(bundle, event, producer=f"{NAME}/{ctx.settings.instance}")]

    return [Route("bench.completed", handle, failure_step="gate", outputs=("gate.decided",)),
            Route("gate.requested", handle, failure_step="gate", outputs=("gate.decided",))]
