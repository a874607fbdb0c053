"""The bundle's own records: per-artifact index records, the manifest, canonical JSON.

Pure: models and byte encodings only; the store in `services.runtime.bundle.bundle`
does the I/O.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Final, Literal

import orjson
from pydantic import BaseModel, Field

from contracts import layout
from contracts.envelope import RunId, Sha256, Strict
from services.runtime.bundle.bundle_paths import InvalidContent

INDEX_RECORD_VERSION: Final = 1
MANIFEST_VERSION: Final = 1
# The stored campaign (a JSON dump of contracts.campaign.Campaign) the manifest
# reads the operator's commands and the source revisions from.
CAMPAIGN_RELPATH = layout.CAMPAIGN

_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS


class IndexRecord(Strict):
    """What the store recorded for one artifact, stored under `<run>/.index/`."""

    version: Literal[1] = Field(default=INDEX_RECORD_VERSION, description="Index record format version.")
    path: str = Field(description="Artifact path relative to the run's bundle folder.")
    sha256: Sha256 = Field(description="Hex sha256 of the artifact's bytes when recorded.")
    size_bytes: int = Field(ge=0, description="Size of the artifact in bytes when recorded.")


class ManifestArtifact(Strict):
    """One artifact as listed by the manifest."""

    path: str = Field(description="Artifact path relative to the run's bundle folder.")
    sha256: Sha256 = Field(description="Hex sha256 of the artifact's bytes.")
    size_bytes: int = Field(ge=0, description="Size of the artifact in bytes.")


class LostEvent(Strict):
    """One event the bundle knows was published but the journal never received."""

    event_id: str = Field(description="The event's event_id.")
    schema_: str | None = Field(
        alias="schema", description="Its schema; null when only a reference to it is known (a causation_id)."
    )
    produced_at: datetime | None = Field(description="When it was produced; null when only a reference to it is known.")
    known_from: Literal["step_record", "emitted", "reference"] = Field(
        description="step_record: a step record (steps/...) holds the event as published; emitted: the record its "
        "producer wrote before publishing it (journal/emitted/...); reference: another event names it as its cause, "
        "or a step record as its trigger."
    )
    referenced_by: str | None = Field(
        default=None, description="For a reference: the event_id (or step record path) that names it."
    )


class GapRecord(Strict):
    """`journal/gaps/<noticed>.json`: the events the journal found lost after Redis lost its state."""

    version: Literal[1] = Field(default=1, description="Gap record format version.")
    redis_state_since: datetime = Field(
        description="When the Redis state the journal read after the loss began (the reset): every event named "
        "was produced before it and was not in events.jsonl when the journal looked."
    )
    noticed_at: datetime = Field(description="When the journal looked (after the reset's settle period).")
    events: list[LostEvent] = Field(description="The events found lost, oldest first where known.")


class EventGap(Strict):
    """A span of the run's events known to be lost: one gap record, less what the journal received since."""

    record: str = Field(description="The gap record it comes from (journal/gaps/...).")
    redis_state_since: datetime = Field(description="When the Redis state that no longer held these events began.")
    first_produced_at: datetime | None = Field(description="Earliest produced_at among the lost events, where known.")
    last_produced_at: datetime | None = Field(description="Latest produced_at among the lost events, where known.")
    count: int = Field(ge=1, description="How many events of the span are still missing from events.jsonl.")
    events: list[LostEvent] = Field(description="The events still missing from events.jsonl.")


class RepairRecord(Strict):
    """`journal/repairs/<noticed>.json`: events the bundle holds whole, missing from events.jsonl, published again."""

    version: Literal[1] = Field(default=1, description="Repair record format version.")
    repaired_at: datetime = Field(description="When the journal published them again (same event IDs).")
    events: list[LostEvent] = Field(description="The events published again, oldest first.")


class EventRepair(Strict):
    """One repair record as the manifest lists it: what was missing and was published again."""

    record: str = Field(description="The repair record it comes from (journal/repairs/...).")
    repaired_at: datetime = Field(description="When the journal published the events again.")
    count: int = Field(ge=1, description="How many events were published again.")
    journaled: int = Field(ge=0, description="How many of them events.jsonl holds now.")
    events: list[LostEvent] = Field(description="The events published again.")


class Manifest(Strict):
    """manifest.json: derived from the index, rebuilt whole; never an artifact itself."""

    version: Literal[1] = Field(default=MANIFEST_VERSION, description="Manifest format version.")
    run_id: RunId = Field(description="The run this bundle belongs to.")
    commands: dict[str, Any] | None = Field(
        description="The operator's commands as stored in campaign.json; null when no campaign is stored."
    )
    source_revisions: dict[str, Any] | None = Field(
        description="Source revisions as stored in campaign.json; null when no campaign is stored."
    )
    artifacts: list[ManifestArtifact] = Field(description="Every recorded artifact, sorted by path.")
    lost_events: list[EventGap] = Field(
        default_factory=list,
        description="Spans of events known to be lost (Redis lost them before the journal read them; "
        "docs/delivery.md, \"The journal after a reset\"); empty when events.jsonl misses no known event.",
    )
    repaired_events: list[EventRepair] = Field(
        default_factory=list,
        description="Events the bundle held whole that events.jsonl lacked, published again by the journal's repair "
        "pass (docs/delivery.md, \"The journal after a reset\"); empty when nothing had to be published again.",
    )


def index_name(relpath: str) -> str:
    """File name of an artifact's index record.

    A hash of the path, not the path itself: it keeps the index flat, makes no
    two paths collide ('a.json' the file vs 'a.json/' a folder), and bounds the
    name length whatever the depth of the artifact.
    """
    return hashlib.sha256(relpath.encode()).hexdigest() + ".json"


def _default(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json", by_alias=True)
    raise TypeError(f"type {type(obj).__name__} is not JSON-serialisable")


def canonical_json(obj: Any) -> bytes:
    """The one byte encoding of JSON artifacts: indented, sorted keys, trailing newline.

    Same data -> same bytes, so a retried handler rewriting its JSON artifact
    hits the write-once check as a no-op, not as a conflict.
    """
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json", by_alias=True)
    try:
        return orjson.dumps(obj, default=_default, option=_JSON_OPTIONS) + b"\n"
    except orjson.JSONEncodeError as err:
        raise InvalidContent(f"cannot store as JSON: {err}; pass plain data or a pydantic model") from err


def still_lost(gaps: dict[str, GapRecord], journaled: set[str]) -> list[EventGap]:
    """Each gap record's events that events.jsonl still lacks (an event published again later, as
    `specdec resume` or a step's adoption does, same event_id, is no longer lost); empty spans dropped."""
    spans = []
    for path, gap in sorted(gaps.items()):
        events = [e for e in gap.events if e.event_id not in journaled]
        if not events:
            continue
        times = [e.produced_at for e in events if e.produced_at is not None]
        spans.append(EventGap(record=path, redis_state_since=gap.redis_state_since, count=len(events), events=events,
                              first_produced_at=min(times, default=None), last_produced_at=max(times, default=None)))
    return spans


def build_manifest(run_id: str, records: list[IndexRecord], campaign: Any | None, *,
                   lost: list[EventGap] | None = None, repaired: list[EventRepair] | None = None) -> Manifest:
    """The manifest of a run from its index records, its stored campaign (or None) and its lost spans.

    A campaign that is not a mapping, or lacks a key, yields null for that
    field: the manifest still lists every artifact.
    """
    mapping = campaign if isinstance(campaign, dict) else {}
    commands = mapping.get("commands")
    revisions = mapping.get("source_revisions")
    return Manifest(
        run_id=run_id,
        commands=commands if isinstance(commands, dict) else None,
        source_revisions=revisions if isinstance(revisions, dict) else None,
        artifacts=[
            ManifestArtifact(path=r.path, sha256=r.sha256, size_bytes=r.size_bytes)
            for r in sorted(records, key=lambda r: r.path)
        ],
        lost_events=lost or [],
        repaired_events=repaired or [],
    )
