"""The record a message becomes on the dead-letter stream `<prefix>.deadletter`."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from contracts.envelope import Strict, new_event_id, utc_now


class DeadLetter(Strict):
    """A message no consumer could handle, with the original payload and why."""

    schema_: Literal["deadletter"] = Field(default="deadletter", alias="schema", description="Always 'deadletter'.")
    version: Literal[1] = Field(default=1, description="Version of this record.")
    dead_letter_id: str = Field(default_factory=new_event_id, description="Unique ID; `specdec dlq replay` takes it.")
    kind: Literal["invalid", "unknown", "exhausted", "failed"] = Field(
        description="invalid: payload failed validation; unknown: unknown schema or version; "
        "exhausted: delivered too often without completing; failed: the handler raised on its last delivery."
    )
    reason: str = Field(description="Why the message was dead-lettered, in words.")
    error: str | None = Field(default=None, description="The last error recorded for the message, if any.")
    service: str = Field(description="Service (consumer group) that gave up on the message.")
    consumer: str = Field(description="Instance that gave up on it.")
    stream: str = Field(description="Stream the message was read from.")
    message_id: str = Field(description="Redis stream entry ID of the original message.")
    delivery_count: int = Field(ge=0, description="Deliveries of the message to the group when it was dead-lettered.")
    run_id: str | None = Field(default=None, description="The run, when the payload named one.")
    event_schema: str | None = Field(default=None, description="The event's schema, when the payload named one.")
    payload: str = Field(description="The original message body, as UTF-8 text (invalid bytes replaced).")
    dead_at: datetime = Field(default_factory=utc_now, description="When it was dead-lettered (UTC).")
