"""Adoption: what the bundle already holds is not produced again (docs/delivery.md#the-bundle-decides-what-is-done).

One mechanism at two grains: a recorded artifact is read back hash-checked instead of produced again,
and a step's output events, recorded before they are published, are re-emitted when Redis lost the
step's done mark. Output event IDs are derived from (run, service, trigger, step key, output schema,
position), so an event emitted again is the same event.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import orjson
from pydantic import BaseModel, Field

from contracts.envelope import ArtifactRef, Event, Strict, utc_now
from contracts.registry import ContractError, Registry, default_registry
from services.runtime.bundle.bundle import ArtifactConflict, ArtifactMissing, BundleError, BundleStore
from services.runtime.bundle.bundle_paths import parse_uri

STEPS_DIR = "steps"


def recorded(bundle: BundleStore, run_id: str, relpath: str) -> tuple[ArtifactRef, bytes] | None:
    """The recorded artifact at `relpath` and its bytes, hash-checked; None when there is none.

    A file the store published without its index record (the writer died between the two) is
    recorded now and counts (`BundleStore.adopt`): the store publishes a file only whole, and the
    paths read here (step records, trial results) have one writer, so the first, durable write
    is the one that counts. Bytes that no longer match their record raise (the evidence cannot
    be trusted), as any read of the bundle does."""
    ref = bundle.adopt(run_id, relpath)
    if ref is None:
        return None
    return ref, bundle.read_bytes(run_id, relpath)


def step_record_path(service: str, trigger_schema: str, step_key: str) -> str:
    return f"{STEPS_DIR}/{service}/{trigger_schema}/{step_key}.json"


def derived_event_id(run_id: str, service: str, trigger: Event, step_key: str, *, schema: str, position: int) -> str:
    """The event ID of a step's `position`-th output of `schema`: the same on every run of the step."""
    seed = "\0".join((run_id, service, trigger.SCHEMA, trigger.event_id, step_key, schema, str(position)))
    return hashlib.sha256(seed.encode()).hexdigest()[:32]


def with_derived_ids(service: str, trigger: Event, step_key: str, outputs: Sequence[Event]) -> list[Event]:
    """`outputs` with their event IDs derived from (run, service, trigger, step key): see the module docstring."""
    seen: dict[str, int] = {}
    derived = []
    for output in outputs:
        position = seen[output.SCHEMA] = seen.get(output.SCHEMA, -1) + 1
        event_id = derived_event_id(trigger.run_id, service, trigger, step_key, schema=output.SCHEMA, position=position)
        derived.append(output.model_copy(update={"event_id": event_id}))
    return derived


class StepRecord(Strict):
    """`steps/<service>/<trigger schema>/<step key>.json`: a completed step and the events it emitted."""

    service: str = Field(description="The service whose step this is.")
    trigger_schema: str = Field(description="Schema of the event that triggered the step.")
    trigger_event_id: str = Field(description="event_id of that event.")
    step_key: str = Field(description="The step key the route derived from the trigger.")
    outputs: list[dict[str, Any]] = Field(description="The output events as published (JSON objects), in order.")
    recorded_at: datetime = Field(default_factory=utc_now, description="When the step was recorded (UTC).")


def completes(declared: Sequence[str], outputs: Sequence[Event]) -> bool:
    """Whether `outputs` end the step: one of the declared completing schemas, or `<step>.failed`
    (a failure is an outcome too: running the step again would not change it)."""
    return any(out.SCHEMA in declared or out.SCHEMA.endswith(".failed") for out in outputs)


def record_step(bundle: BundleStore, service: str, trigger: Event, step_key: str, *,
                outputs: Sequence[Event]) -> list[Event]:
    """Write the step's record (write-once) before its outputs are published; the outputs to publish.

    Should another attempt have recorded the step first (a race the ledger's lease makes rare),
    its record wins: its events are the ones published, so the step has one set of outputs."""
    record = StepRecord(service=service, trigger_schema=trigger.SCHEMA, trigger_event_id=trigger.event_id,
                        step_key=step_key, outputs=[orjson.loads(out.to_json()) for out in outputs])
    relpath = step_record_path(service, trigger.SCHEMA, step_key)
    try:
        bundle.write_json(trigger.run_id, relpath, record.model_dump(mode="json"))
    except ArtifactConflict:
        return list(outputs) if (adopted := read_step(bundle, trigger.run_id, relpath)) is None else adopted.events
    return list(outputs)


class Adopted(BaseModel):
    """A step's record, read back and checked: the events to emit again."""

    record: StepRecord = Field(description="The record as stored.")
    events: list[Any] = Field(description="Its output events, parsed (contracts.registry).")


def read_step(bundle: BundleStore, run_id: str, relpath: str, registry: Registry | None = None) -> Adopted | None:
    """The step record at `relpath` with its events parsed; None when there is none, or when one of the
    artifacts its events name is no longer recorded with the same hash (the step then runs again)."""
    found = recorded(bundle, run_id, relpath)
    if found is None:
        return None
    record = StepRecord.model_validate_json(found[1])
    registry = registry or default_registry()
    try:
        events = [registry.parse(orjson.dumps(out)) for out in record.outputs]
    except ContractError as exc:
        raise BundleError(f"the step record {relpath} holds an event this code cannot read: {exc}") from None
    for event in events:
        for ref in artifact_refs(event):
            ref_run, ref_path = parse_uri(ref.uri)
            try:
                now = bundle.ref(ref_run, ref_path)
            except ArtifactMissing:
                return None
            if (now.sha256, now.size_bytes) != (ref.sha256, ref.size_bytes):
                return None
    return Adopted(record=record, events=events)


def adopt_step(bundle: BundleStore, service: str, trigger: Event, step_key: str, *,
               registry: Registry | None = None) -> list[Event] | None:
    """The events a recorded run of this step emitted, to emit again; None when the step must run."""
    adopted = read_step(bundle, trigger.run_id, step_record_path(service, trigger.SCHEMA, step_key), registry)
    return None if adopted is None else adopted.events


def step_records(bundle: BundleStore, run_id: str) -> Iterator[StepRecord]:
    """Every step record of a run (any service), as stored."""
    for ref in bundle.artifacts(run_id):
        _, relpath = parse_uri(ref.uri)
        if relpath.startswith(STEPS_DIR + "/"):
            found = recorded(bundle, run_id, relpath)
            if found is not None:
                yield StepRecord.model_validate_json(found[1])


def artifact_refs(value: Any) -> Iterator[ArtifactRef]:
    """Every ArtifactRef inside an event (fields, lists, dicts, nested models)."""
    if isinstance(value, ArtifactRef):
        yield value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from artifact_refs(getattr(value, name))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from artifact_refs(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from artifact_refs(item)
