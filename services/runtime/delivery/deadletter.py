"""Dead-lettering: a message the consumer gives up on, moved to the dead-letter stream with its payload."""

from __future__ import annotations

from contracts.deadletter import DeadLetter
from contracts.envelope import Event
from services.runtime.delivery.broker import Bus
from services.runtime.delivery.route import Delivery


async def dead_letter(
    bus: Bus,
    service: str,
    delivery: Delivery,
    deliveries: int,
    *,
    kind: str,
    reason: str,
    error: str | None = None,
    event: Event | None = None,
) -> None:
    """Publish `delivery`'s dead letter (`kind`: unknown, invalid, exhausted or failed), then ack it."""
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
    await bus.publish_raw(bus.deadletter, record.model_dump_json(by_alias=True).encode(), headers, record.dead_letter_id)
    # Ack only after the dead letter is durable: it now holds the payload.
    await delivery.ack()
