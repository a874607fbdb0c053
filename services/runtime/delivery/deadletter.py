"""Dead-lettering: a message the consumer gives up on, moved to the dead-letter stream with its payload."""

from __future__ import annotations

import asyncio

import structlog

from contracts.deadletter import DeadLetter
from contracts.envelope import Event
from services.runtime.bundle.bundle import BundleError, BundleStore
from services.runtime.delivery.broker import Bus
from services.runtime.delivery.route import Delivered
from services.runtime.delivery.tally import record_dead


async def dead_letter(
    bus: Bus,
    service: str,
    delivery: Delivered,
    deliveries: int,
    *,
    kind: str,
    reason: str,
    error: str | None = None,
    event: Event | None = None,
    step: tuple[BundleStore | None, str] | None = None,
) -> DeadLetter:
    """Publish `delivery`'s dead letter (`kind`: unknown, invalid, exhausted or failed), then ack it.

    With `step` (the service's bundle and the step key of `event`) the step is also marked dead in
    its run's bundle (tally.py), so catch-up leaves it alone across restarts and resets until the
    dead letter is replayed."""
    record = DeadLetter(
        kind=kind,
        reason=reason,
        error=error,
        service=service,
        consumer=delivery.consumer,
        stream=delivery.stream,
        message_id=delivery.message_id,
        delivery_count=deliveries,
        run_id=event.run_id if event else None,
        event_schema=event.SCHEMA if event else None,
        payload=delivery.body.decode("utf-8", errors="replace"),
    )
    headers = {"schema": "deadletter", "run_id": record.run_id or "", "content-type": "application/json"}
    await bus.publish_raw(
        bus.deadletter, record.model_dump_json(by_alias=True).encode(), headers, record.dead_letter_id
    )
    # The mark after the dead letter: a mark without its dead letter could never be replayed. A crash
    # between the two leaves the entry unacked (or the bundle's step unmarked): it is dead-lettered again.
    bundle, step_key = step if step is not None else (None, "")
    if bundle is not None and event is not None:
        try:
            await asyncio.to_thread(record_dead, bundle, event.run_id, service=service, schema=event.SCHEMA,
                                    step_key=step_key, dead_letter_id=record.dead_letter_id, kind=kind)
        except (BundleError, OSError) as exc:
            structlog.get_logger().bind(service=service).warning(
                "the dead-lettered step is not marked in the bundle: catch-up may take it up again",
                run_id=event.run_id, dead_letter_id=record.dead_letter_id, error=f"{type(exc).__name__}: {exc}")
    # Ack only after the dead letter is durable: it now holds the payload.
    await delivery.ack()
    return record
