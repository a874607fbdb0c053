"""Executing an approved bench plan: the executor, the bench run, `bench.completed`.

The plan was read back from the bundle, hash-checked, by the review mechanism
(services/runtime/review.py); this module picks its executor, runs every
launch and trial (services/bench/run.py) and turns the outcome into events.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from contracts import layout
from contracts.campaign import Campaign
from contracts.catalogue import BENCH
from contracts.envelope import Event
from contracts.events import BenchCompleted, BenchTrialCompleted
from contracts.progress import PROGRESS_UNITS, StepProgress
from services.bench import node_lock
from services.bench.executors.executor import LocalExecutor, ServingExecutor
from services.bench.executors.kubernetes import KubernetesExecutor, require_kubectl
from services.bench.executors.slurm import SlurmExecutor
from services.bench.planning.model import BenchPlan
from services.bench.progress import Snapshot
from services.bench.run import BenchRun, read_prompts
from services.runtime.bundle.bundle import BundleStore
from services.runtime.bundle.outbox import record_emitted
from services.runtime.delivery.progress import publish_progress
from services.runtime.delivery.route import StepContext
from services.runtime.errors import StepFailed
from services.runtime.resources import NodeCheck
from services.shared.capacity.recheck import recheck


def make_executor(plan: BenchPlan, bundle: BundleStore, *, take_back: bool = False) -> ServingExecutor:
    if plan.executor == "slurm":
        return SlurmExecutor(plan.run_id, bundle)
    if plan.executor == "kubernetes":
        require_kubectl()
        first = plan.launches[0].kubernetes if plan.launches else None
        return KubernetesExecutor(plan.run_id, bundle, first.cleanup_argv if first else [])
    return LocalExecutor(plan.run_id, bundle, take_back=take_back)


async def sole_owner(ctx: StepContext) -> str | None:
    """None when this step's lease is the only lease of the bench-runner on its run, else why not.

    Ownership of a run's servers is the lease's: an instance that holds the run's bench step, with no
    other live instance holding work of the same run, owns whatever carries the run's label; a
    labelled process then belongs to an earlier owner that died. Nothing is decided from process
    names, ages or parents."""
    if ctx.lease is None:
        return "the step runs without a lease"
    others = await ctx.lease.others()
    if others:
        return f"other instances hold work of this run ({', '.join(sorted(set(others.values())))})"
    return None


async def execute(
    bundle: BundleStore, campaign: Campaign, plan: BenchPlan, event: Event, *, ctx: StepContext,
    node_check: NodeCheck | None = None,
) -> list[Event]:
    """Run the plan; `bench.completed`, or StepFailed when the standing cell failed."""
    producer = f"{BENCH}/{ctx.settings.instance}"
    # Before any launch: a Kubernetes plan without kubectl fails here.
    # Only local servers are taken back by their label here (Slurm and Kubernetes clean up by their own labels).
    not_owned = await sole_owner(ctx) if plan.executor == "local" else "not a local plan"
    if plan.executor == "local" and not_owned is not None:
        ctx.log.info("nothing taken back: labelled processes of this run stay busy to the idle check", reason=not_owned)
    executor = make_executor(plan, bundle, take_back=not_owned is None)
    prompts = read_prompts(bundle, event.run_id, Path(layout.BENCH_PROMPTS))

    hold: node_lock.NodeHold | None = None

    async def check(node: str) -> str | None:
        # Fencing first: a run that lost its node lock launches nothing (NodeLockLost: the step is retried).
        if hold is not None:
            await hold.check(node)
        # Production repeats the capacity check before each launch; tests may attach their own.
        if node_check is not None:
            return await node_check(node)
        seen = await asyncio.to_thread(recheck, bundle, campaign, node, event.run_id, folder=layout.BENCH_RECHECK_DIR)
        return None if seen.idle else "; ".join(seen.reasons) or "not idle"

    async def emit(trial: Event) -> None:
        # Recorded before it is published (services/runtime/bundle/outbox.py): should Redis lose it, the
        # journal publishes it again; a retry's rebuilt event publishes the one recorded first.
        await ctx.emit(record_emitted(bundle, trial))

    async def report(snapshot: Snapshot) -> None:
        # How far the run is, for `specdec watch` and the demo: published once, never journaled (contracts/progress.py).
        await publish_progress(ctx.bus, event.caused(
            StepProgress, producer=producer, step="bench", unit=PROGRESS_UNITS["bench"], done=snapshot.done,
            total=snapshot.total or None, loss=None, eta_s=snapshot.eta_s, elapsed_s=snapshot.elapsed_s), ctx.log)

    run = BenchRun(
        plan, bundle, prompts, emit=emit, recheck=check,
        event_factory=lambda **fields: event.caused(BenchTrialCompleted, producer=producer, **fields),
        eval_values={"model": plan.cells[0].identity["model"], "tokenizer": campaign.target.tokenizer_dir},
        executor=executor, max_model_len=campaign.target.max_model_len, report=report,
    )
    if ctx.lease is None:  # outside a consumer (no ledger): nothing to coordinate with
        outcome = await run.execute()
    else:
        # One bench per node: the whole step (take-back, launches, cleanup) under the nodes' lock;
        # a second run's bench waits here, queued (services/bench/node_lock.py).
        async with node_lock.hold(ctx.lease.ledger, plan.run_id, ctx.settings.instance,
                                  (cell.node for cell in plan.cells), ttl_ms=ctx.settings.lease_ttl_ms,
                                  renew_s=ctx.settings.heartbeat_s, log=ctx.log) as hold:
            run.lock_token = hold.token
            outcome = await run.execute()
    if outcome.cleaned:
        ctx.log.info("cleaned up by label", executor=plan.executor, cleaned=outcome.cleaned)
    if outcome.rounds:
        last = outcome.rounds[-1]
        ctx.log.info("sequential rounds stopped", trials_per_arm=last["trials_per_arm"], stopped=last["stopped"],
                     max_trials=last["max_trials"], open_levels=[(lvl["candidate"], lvl["concurrency"])
                                                              for lvl in last["levels"] if lvl["open"]])
    if outcome.cleanup_error:
        ctx.log.warning("cleanup by label failed: labelled work may be left; clean up by the label",
                        executor=plan.executor, error=outcome.cleanup_error, label=f"experiment={plan.run_id}")
    standing = run.baseline
    if standing in outcome.failed_cells:
        raise StepFailed(f"the standing cell {standing} failed, so nothing can be compared: "
                         f"{outcome.failed_cells[standing]}", error_type="StandingCellFailed")
    for cell_id, reason in outcome.failed_cells.items():
        ctx.log.error("cell failed", cell_id=cell_id, reason=reason)
    return [event.caused(BenchCompleted, producer=producer, results=outcome.results,
                         failed_cells=outcome.failed_cells, draft=plan.draft)]
