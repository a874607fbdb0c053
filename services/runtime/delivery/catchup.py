"""Runs resume: a service takes up the runs waiting on it from the bundle, not from Redis.

On start and after each detected reset, a known event that triggers one of the service's recorded
routes is delivered like a stream entry (lease, adoption, record) unless the bundle, the journal or
the ledger says its step is done, it is dead-lettered, or it runs in this instance. Deliveries are
counted in the run's bundle (tally.py), so a step failing on every take-up is dead-lettered
(docs/delivery.md#runs-resume).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import orjson

from contracts.catalogue import produced_by, step_of
from contracts.registry import ContractError
from services.runtime.bundle.bundle import BundleError, BundleStore
from services.runtime.delivery.adopt import step_record_path, step_records
from services.runtime.delivery.consumer import Route
from services.runtime.delivery.ledger import StepKey
from services.runtime.delivery.service import Service
from services.runtime.delivery.tally import run_paths, tally_of


class _Known:
    """A known event handed to the consumer as if delivered, with nothing to ack."""

    fresh = True
    group = ""
    # Counted in the run's bundle (tally.py) once its lease is held: no stream entry counts it.
    from_bundle = True

    def __init__(self, body: bytes, stream: str, event_id: str) -> None:
        self.body = body
        self.stream = stream
        self.consumer = "catch-up"
        self.message_id = f"catch-up-{event_id}"

    async def delivery_count(self) -> int:
        return 1  # until the consumer counts it in the bundle

    async def ack(self) -> None:
        """Nothing to ack: the event came from the bundle."""


def known_events(bundle: BundleStore, run_id: str) -> list[dict[str, Any]]:
    """A run's events as the bundle knows them: the journal and every step record's outputs, once each."""
    found: dict[str, dict[str, Any]] = {}
    for event in bundle.events(run_id):
        if isinstance(event.get("event_id"), str):
            found.setdefault(event["event_id"], event)
    for record in step_records(bundle, run_id):
        for event in record.outputs:
            found.setdefault(str(event.get("event_id")), event)
    return sorted(found.values(), key=lambda e: str(e.get("produced_at", "")))


def completing(service: str, route: Route) -> tuple[str, ...]:
    """The schemas that complete a route's step: its declaration, else the catalogue's events of its
    failure step that this service produces (the gate's `gate.decided`); none for a route without a step."""
    if route.outputs:
        return route.outputs
    if route.failure_step is None:
        return ()
    return tuple(spec.schema for spec in produced_by(service)
                 if step_of(spec.schema) == route.failure_step and not spec.schema.endswith(".failed"))


def _done_in_journal(events: Iterable[dict[str, Any]], service: str, trigger_id: str, outputs: tuple[str, ...]) -> bool:
    return any(e.get("causation_id") == trigger_id and str(e.get("producer", "")).startswith(f"{service}/")
               and (e.get("schema") in outputs or str(e.get("schema", "")).endswith(".failed")) for e in events)


class CatchUp:
    """One instance's catch-up over the bundle (module docstring)."""

    def __init__(self, service: Service, bundle: BundleStore, log: Any) -> None:
        self.service = service
        self.bundle = bundle
        self.log = log
        self.routes = {route.schema: route for route in service.routes if completing(service.name, route)}
        self.ready = asyncio.Event()  # set once the service serves: taking a step up publishes
        self.task: asyncio.Task[None] | None = None
        self._again = False
        self.taken_up: list[tuple[str, str]] = []  # (run_id, trigger schema), for logs and tests

    def schedule(self) -> None:
        """Run a pass in the background (one more after it when one is running)."""
        if not self.routes:
            return
        if self.task is not None and not self.task.done():
            self._again = True
            return
        self.task = asyncio.get_running_loop().create_task(self._passes())

    async def _passes(self) -> None:
        await self.ready.wait()
        while True:
            self._again = False
            try:
                await self.run_pass()
            except (BundleError, OSError) as exc:
                self.log.error("catch-up over the bundle failed; the next reset or start tries again",
                               error=f"{type(exc).__name__}: {exc}")
            if not self._again:
                return

    async def run_pass(self) -> int:
        """Take up every waiting step once; how many were taken up."""
        consumer = self.service.consumer
        taken = 0
        for run_id in await asyncio.to_thread(self.bundle.list_runs):
            events = await asyncio.to_thread(known_events, self.bundle, run_id)
            paths = await asyncio.to_thread(run_paths, self.bundle, run_id)
            for raw in events:
                route = self.routes.get(str(raw.get("schema")))
                if route is None:
                    continue
                body = orjson.dumps(raw)
                try:
                    event = consumer.registry.parse(body)
                except ContractError as exc:
                    self.log.warning("a known event cannot be read; not taken up", run_id=run_id, error=str(exc))
                    continue
                step_key = route.step_key(event)
                key = StepKey(self.service.name, run_id, event.SCHEMA, step_key)
                if key in consumer.running:
                    # Running in this instance: not waiting, and its trigger is this delivery's own.
                    self.log.debug("a run's step runs in this instance; not taken up", run_id=run_id,
                                   trigger=event.SCHEMA, step_key=step_key)
                    continue
                record = step_record_path(self.service.name, event.SCHEMA, step_key)
                if await asyncio.to_thread(self._recorded, run_id, record):
                    continue
                if _done_in_journal(events, self.service.name, event.event_id, completing(self.service.name, route)):
                    continue
                if (dead := tally_of(paths, self.service.name, event.SCHEMA, step_key).dead) is not None:
                    self.log.info("a dead-lettered step is not taken up; `specdec dlq replay` runs it again",
                                  run_id=run_id, trigger=event.SCHEMA, dead_letter_id=dead)
                    continue
                if await consumer.ledger.is_done(key):
                    continue
                self.log.warning("a run waits on this service and its trigger is not in Redis; taking it up "
                                 "from the bundle", run_id=run_id, trigger=event.SCHEMA, event_id=event.event_id)
                taken += 1
                self.taken_up.append((run_id, event.SCHEMA))
                await consumer.handle(route, _Known(body, self.service.bus.stream_of(event.SCHEMA), event.event_id))
        return taken

    def _recorded(self, run_id: str, relpath: str) -> bool:
        try:
            # A step record a kill left without its index record counts (recorded now: BundleStore.adopt).
            return self.bundle.adopt(run_id, relpath) is not None
        except BundleError:
            return False
