"""Journal entrypoint: every event of every stream goes into its run's events.jsonl, once (idempotent on event_id).

A consumer group of its own sees every event whatever the other services do. It also publishes again what
the bundle recorded whole and events.jsonl lacks, and trims each stream below what every group has acked
(trim.py; docs/delivery.md#the-journal-after-a-reset, docs/delivery.md#trimming)."""

from __future__ import annotations

import asyncio
from typing import Any

from contracts.catalogue import CATALOGUE, JOURNAL
from contracts.envelope import Event
from services.journal.trim import Trimmer
from services.runtime.bundle.bundle import BundleStore
from services.runtime.bundle.gaps import note_gaps
from services.runtime.bundle.repair import REPAIR_EVERY_HEARTBEATS, keep_repairing, repair
from services.runtime.delivery.consumer import Route, StepContext
from services.runtime.delivery.reconcile import settle_period_s
from services.runtime.delivery.service import Service
from services.runtime.resources import Resources

NAME = JOURNAL


def record(bundle: BundleStore, event: Event) -> bool:
    """Append one event to its run's journal; False when it was already there."""
    bundle.create_run(event.run_id)
    appended = bundle.append_event(event.run_id, event.event_id, event.to_json())
    bundle.rebuild_manifest(event.run_id)
    return appended


def routes(resources: Resources) -> list[Route]:
    bundle = resources.bundle
    trimmer: Trimmer = resources.state.setdefault("trimmer", Trimmer())

    async def handle(event: Event, ctx: StepContext) -> list[Event]:
        record(bundle, event)
        await trimmer.after(ctx.settings, event.SCHEMA, ctx.log)
        return []

    return [Route(spec.schema, handle, step_key=lambda event: event.event_id) for spec in CATALOGUE]


async def after_reconcile(service: Service, resources: Resources, log: Any) -> None:
    """Called by services/runtime/main.py after each reconcile pass: publish again what the bundle recorded
    and the journal lacks, record the events Redis lost, keep repairing the runs not finished, then trim
    every stream, and from the first pass on every SWEEP_S (a stream gone quiet has no event to trim it)."""
    bundle, settle_s = resources.bundle, settle_period_s(service.settings.heartbeat_s)
    await repair(bundle, service.bus, log, settle_s, all_runs=True)
    await note_gaps(bundle, service.consumer.ledger, log, settle_s)
    if "repairing" not in resources.state:  # one periodic pass per process, started by its first reconcile pass
        every_s = REPAIR_EVERY_HEARTBEATS * service.settings.heartbeat_s
        resources.state["repairing"] = asyncio.get_running_loop().create_task(
            keep_repairing(bundle, service.bus, log, settle_s=settle_s, every_s=every_s))
    trimmer: Trimmer = resources.state["trimmer"]
    await trimmer.sweep(service.settings, log)
    trimmer.keep_sweeping(service.settings, log)
