"""Events recorded whole by their producer before it publishes them: `journal/emitted/<event_id>.json`.

A step's completing outputs are recorded in its step record (services/runtime/delivery/adopt.py); two
kinds of event are published outside one, and Redis may lose them after the publish returned (the
last second of an `appendfsync everysec` AOF at a power loss, with no reset to notice) or before it
(a kill, an outage longer than the emit's retries):

- `campaign.submitted`, published by `specdec submit` (services/app/campaign/submit.py): lost, it
  strands the run before its first step;
- `bench.trial.completed`, published while the bench step runs (services/bench/executors/execution.py).

Each is recorded here first, write-once, so the bundle holds what was published and the journal's
repair pass (services/runtime/bundle/repair.py) publishes again, same event ID, what events.jsonl
lacks. A second record of the same event ID (a retry built the event again, with another
`produced_at`) keeps the first: the event published is the one recorded.
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
