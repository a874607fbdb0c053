"""Events recorded whole by their producer before it publishes them: `journal/emitted/<event_id>.json`.

For the two events published outside a step record (`campaign.submitted`, `bench.trial.completed`), so
the journal's repair pass can publish again, same event ID, what Redis lost (docs/design.md#the-outbox).
A second record of one event ID keeps the first: the event published is the one recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

import orjson

from contracts.envelope import Event
from contracts.layout import EMITTED_DIR
from services.runtime import failpoints
from services.runtime.bundle.bundle import ArtifactConflict, ArtifactMissing, BundleStore
from services.runtime.bundle.bundle_paths import parse_uri

E = TypeVar("E", bound=Event)


def emitted_path(event_id: str) -> str:
    return f"{EMITTED_DIR}/{event_id}.json"


def record_emitted(bundle: BundleStore, event: E) -> E:
    """Record `event` whole before it is published; the event to publish (the one recorded first)."""
    relpath = emitted_path(event.event_id)
    try:
        bundle.write_bytes(event.run_id, relpath, event.to_json())
    except ArtifactConflict:
        if bundle.adopt(event.run_id, relpath) is None:
            raise ArtifactMissing(f"{relpath} conflicted and is gone: the bundle was changed under the run") from None
        return type(event).model_validate_json(bundle.read_bytes(event.run_id, relpath))
    failpoints.hit("outbox.recorded-before-publish")
    return event


def emitted_events(bundle: BundleStore, run_id: str) -> Iterator[dict[str, Any]]:
    """Every event recorded here for the run, as published (JSON objects)."""
    for ref in bundle.artifacts(run_id):
        _, relpath = parse_uri(ref.uri)
        if relpath.startswith(EMITTED_DIR + "/"):
            event = orjson.loads(bundle.read_bytes(run_id, relpath))
            if isinstance(event, dict):
                yield event
