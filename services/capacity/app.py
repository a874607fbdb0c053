"""Capacity entrypoint: corpus.completed or capacity.requested -> capacity.selected | capacity.unavailable.

The read-only check runs off the event loop, so the step's lease heartbeat keeps running; its snapshot
and raw outputs are stored under `capacity/`. A scheduler or section that cannot be used is
`capacity.failed` (a retry would not help). The operator's idle check is a program the campaign names, so
it runs here only for a run with the typed acknowledgement (docs/capacity.md)."""

from __future__ import annotations

import asyncio

from contracts.campaign import Campaign
from contracts.catalogue import CAPACITY
from contracts.envelope import Event
from contracts.events import CapacitySelected, CapacityUnavailable, CorpusCompleted
from services.runtime.bundle.bundle import BundleStore
from services.runtime.campaign import load_campaign
from services.runtime.delivery.consumer import Route, StepContext
from services.runtime.resources import Resources
from services.shared.capacity.check import check_node
from services.shared.capacity.snapshot import write_snapshot
from services.shared.scheduler.runner import CommandRunner, SubprocessRunner

NAME = CAPACITY
STEP = "capacity"
# What completes the step (services/runtime/delivery/adopt.py): recorded in the bundle, re-emitted instead of re-run.
DONE_BY = (CapacitySelected.SCHEMA, CapacityUnavailable.SCHEMA)
# Recorded in the snapshot and on capacity.selected when the idle check is not run.
NOT_ACKNOWLEDGED = (
    "the operator's idle check (capacity.idle_check) was not run: the run is not acknowledged "
    "(acknowledgements.i_understand_this_mutates_cluster is false, as in a dry run), so the node was selected "
    "from the scheduler's read-only view alone; the idle check runs at the pre-launch re-check of an "
    "acknowledged run, before anything is launched"
)


def idle_check_skipped(campaign: Campaign) -> str | None:
    """Why the capacity step does not run the campaign's idle check; None when it runs it."""
    return None if campaign.acknowledgements.i_understand_this_mutates_cluster else NOT_ACKNOWLEDGED


def run_step(bundle: BundleStore, runner: CommandRunner, event: Event, producer: str) -> Event:
    """The whole step, synchronously: campaign -> check (the idle check only when acknowledged) -> snapshot -> event."""
    campaign = load_campaign(bundle, event.run_id)
    spec = campaign.capacity
    skipped = idle_check_skipped(campaign)
    verdict = check_node(spec, None, run_id=event.run_id, runner=runner, skip_idle_check=skipped)
    snapshot = write_snapshot(bundle, verdict, spec)
    if verdict.idle and verdict.node is not None:
        # The corpus travels on to the trainer-proxy, which then needs no lookup of its own.
        corpus = event.corpus if isinstance(event, CorpusCompleted) else None
        return event.caused(CapacitySelected, producer=producer, scheduler=spec.scheduler, node=verdict.node,
                            snapshot=snapshot, corpus=corpus, idle_check_skipped=skipped)
    return event.caused(
        CapacityUnavailable, producer=producer, scheduler=spec.scheduler, reasons=verdict.reasons, snapshot=snapshot
    )


def routes(resources: Resources) -> list[Route]:
    bundle = resources.bundle
    # Tests may attach a runner (e.g. one that sets SLURM_CONF); production runs the real commands.
    runner: CommandRunner = resources.capacity_runner or SubprocessRunner()

    async def handle(event: Event, ctx: StepContext) -> list[Event]:
        producer = f"{ctx.service}/{ctx.settings.instance}"
        if isinstance(event, CorpusCompleted) and event.skipped_reason:
            ctx.log.info("corpus was skipped; capacity is still needed for the bench", reason=event.skipped_reason)
        result = await asyncio.to_thread(run_step, bundle, runner, event, producer)
        return [result]

    # One check per event (step key = event_id): a redelivered event is not checked
    # twice, while a new capacity.requested checks again (capacity changes over time).
    # A StepFailed is capacity.failed, also when the trigger was corpus.completed.
    return [
        Route(
            CorpusCompleted.SCHEMA, handle, step_key=lambda event: event.event_id, failure_step=STEP, outputs=DONE_BY
        ),
        Route("capacity.requested", handle, step_key=lambda event: event.event_id, failure_step=STEP, outputs=DONE_BY),
    ]
