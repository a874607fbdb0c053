"""The journal after a reset: name the events Redis lost before the journal read them.

After each reconcile pass of the journal, an event the bundle knows (a step record holds it, or another
event names it), produced before the current Redis state began, that events.jsonl lacks is written to a
gap record and named in the manifest's `lost_events`. What nothing records or names cannot be named:
never more than is known to be lost (docs/delivery.md#the-journal-after-a-reset).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from contracts.envelope import utc_now
from contracts.layout import GAPS_DIR
from services.runtime.bundle.bundle import BundleError, BundleStore
from services.runtime.bundle.bundle_paths import parse_uri
from services.runtime.bundle.bundle_records import GapRecord, LostEvent
from services.runtime.delivery.adopt import step_record_path, step_records
from services.runtime.delivery.ledger import Ledger


def _when(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def find_lost(bundle: BundleStore, run_id: str, before: datetime) -> list[LostEvent]:
    """The run's events the bundle knows of, produced before `before`, that events.jsonl lacks."""
    journal = bundle.events(run_id)
    journaled = {e.get("event_id") for e in journal}
    recorded: dict[str, dict[str, Any]] = {}
    # referenced event_id -> (its schema where known, what names it, when that was produced)
    references: dict[str, tuple[str | None, str, datetime | None]] = {}
    for record in step_records(bundle, run_id):
        for out in record.outputs:
            recorded.setdefault(str(out.get("event_id")), out)
        path = step_record_path(record.service, record.trigger_schema, record.step_key)
        references.setdefault(record.trigger_event_id, (record.trigger_schema, path, record.recorded_at))
    for event in [*journal, *recorded.values()]:
        cause = event.get("causation_id")
        if isinstance(cause, str):
            references.setdefault(cause, (None, str(event.get("event_id")), _when(event.get("produced_at"))))
    lost = []
    for event_id, event in recorded.items():
        produced = _when(event.get("produced_at"))
        if event_id not in journaled and produced is not None and produced < before:
            lost.append(LostEvent(event_id=event_id, schema_=event.get("schema"), produced_at=produced,
                                  known_from="step_record"))
    for event_id, (schema, by, at) in references.items():
        # Named by something produced before the reset: the named event is older still.
        if event_id not in journaled and event_id not in recorded and at is not None and at < before:
            lost.append(LostEvent(event_id=event_id, schema_=schema, produced_at=None, known_from="reference",
                                  referenced_by=by))
    return sorted(lost, key=lambda e: (e.produced_at is None, e.produced_at or before, e.event_id))


def named_before(bundle: BundleStore, run_id: str) -> set[str]:
    """Event IDs the run's earlier gap records already name."""
    named: set[str] = set()
    for ref in bundle.artifacts(run_id):
        _, relpath = parse_uri(ref.uri)
        if relpath.startswith(GAPS_DIR + "/"):
            gap = GapRecord.model_validate_json(bundle.read_bytes(run_id, relpath))
            named |= {e.event_id for e in gap.events}
    return named


def gap_path(noticed_at: datetime) -> str:
    return f"{GAPS_DIR}/{noticed_at.strftime('%Y%m%dT%H%M%S%fZ')}.json"


def record_gaps(bundle: BundleStore, redis_since: datetime) -> dict[str, list[LostEvent]]:
    """One pass over every run (module docstring): the events newly found lost, by run."""
    found = {}
    for run_id in bundle.list_runs():
        already = named_before(bundle, run_id)
        lost = [e for e in find_lost(bundle, run_id, redis_since) if e.event_id not in already]
        if not lost:
            continue
        noticed = utc_now()
        record = GapRecord(redis_state_since=redis_since, noticed_at=noticed, events=lost)
        bundle.write_json(run_id, gap_path(noticed), record)
        bundle.rebuild_manifest(run_id)
        found[run_id] = lost
    return found


async def note_gaps(bundle: BundleStore, ledger: Ledger, log: Any, settle_s: float) -> dict[str, list[LostEvent]]:
    """Record the events lost since the current Redis state began; one warning per run with a loss.

    The cutoff is the ledger's birth, or a settle period ago when that is earlier: the ledger is
    born lazily (the first service to ask after the reset), and what was produced within the
    last settle period may still be on its way to the journal, whereas the reset that lost
    events was noticed at least a settle period before this pass."""
    now = utc_now()
    try:
        age_s = await ledger.age_s()
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        # Redis went away after the pass: when it answers again it is a reset (or not) of its
        # own, whose pass looks again.
        log.warning("could not read the ledger's age to look for events Redis lost; the next pass looks",
                    error=f"{type(exc).__name__}: {exc}")
        return {}
    redis_since = min(now - timedelta(seconds=age_s), now - timedelta(seconds=settle_s))
    try:
        found = await asyncio.to_thread(record_gaps, bundle, redis_since)
    except (BundleError, OSError) as exc:
        log.error("looking for events Redis lost failed; the next reset or start looks again",
                  error=f"{type(exc).__name__}: {exc}")
        return {}
    for run_id, lost in found.items():
        log.warning("events Redis lost before the journal read them; the run's manifest names them",
                    run_id=run_id, lost=len(lost), schemas=sorted({str(e.schema_) for e in lost}))
    return found
