"""Capacity entrypoint: corpus.completed or capacity.requested -> capacity.selected | capacity.unavailable.

The handler loads the run's campaign from the bundle, runs the read-only check
(off the event loop, so the step's lease heartbeat keeps running), stores the
snapshot and raw outputs under `capacity/`, and turns the verdict into an event.
A scheduler that cannot be read, or a capacity section that cannot be used,
is `capacity.failed` with the reason: the check's errors are `StepFailed`
(services.shared.capacity.errors, services.shared.scheduler.errors), so they
propagate as they are. The operator must act, a retry would not help.
"""

from __future__ import annotations

import asyncio
from typing import Any

from contracts.catalogue import CAPACITY
from contracts.envelope import Event
from contracts.events import CapacitySelected, CapacityUnavailable, CorpusCompleted
from services.runtime.bundle.bundle import BundleStore
from services.runtime.campaign import load_campaign
from services.runtime.delivery.consumer import Route, StepContext
from services.shared.capacity.check import check_node
from services.shared.capacity.snapshot import write_snapshot
from services.shared.scheduler.runner import CommandRunner, SubprocessRunner

NAME = CAPACITY
STEP = "capacity"
# What completes the step (services/runtime/delivery/adopt.py): recorded in the bundle, re-emitted instead of re-run.
DONE_BY = (CapacitySelected.SCHEMA, CapacityUnavailable.SCHEMA)


def run_step(bundle: BundleStore, runner: CommandRunner, event: Event, producer: str) -> Event:
    """The whole step, synchronously: campaign -> check -> snapshot -> event."""
    campaign = load_campaign(bundle, event.run_id)
    spec = campaign.capacity
    verdict = check_node(spec, None, run_id=event.run_id, runner=runner)
    snapshot = write_snapshot(bundle, verdict, spec)
    if verdict.idle and verdict.node is not None:
        # The corpus travels on to the trainer-proxy, which then needs no lookup of its own.
        corpus = event.corpus if isinstance(event, CorpusCompleted) else None
        return event.caused(CapacitySelected, producer=producer, scheduler=spec.scheduler, node=verdict.node,
                            snapshot=snapshot, corpus=corpus)
    return event.caused(
        CapacityUnavailable, producer=producer, scheduler=spec.scheduler, reasons=verdict.reasons, snapshot=snapshot
    )


def routes(resources: dict[str, Any]) -> list[Route]:
    bundle: BundleStore = resources["bundle"]
    # Tests may attach a runner (e.g. one that sets SLURM_CONF); production runs the real commands.
    runner: CommandRunner = resources.get("capacity_runner") or SubprocessRunner()

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
        Route(CorpusCompleted.SCHEMA, handle, step_key=lambda event: event.event_id, failure_step=STEP, outputs=DONE_BY),
        Route("capacity.requested", handle, step_key=lambda event: event.event_id, failure_step=STEP, outputs=DONE_BY),
    ]
