"""The journal's repair pass: what the bundle holds whole and events.jsonl lacks is published again.

An event a step record or the outbox holds, older than a settle period and missing from the journal,
was lost in transport (a reset, the last AOF second, a producer killed before its publish); it is
published again with its own event ID, so every consumer dedups it, and named in the manifest's
`repaired_events` (docs/delivery.md#repair-what-the-bundle-recorded-is-published-again).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import orjson
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from contracts.envelope import utc_now
from contracts.layout import REPAIRS_DIR
from contracts.registry import ContractError, default_registry
from services.runtime.bundle.bundle import BundleError, BundleStore
from services.runtime.bundle.bundle_paths import parse_uri
from services.runtime.bundle.bundle_records import LostEvent, RepairRecord
from services.runtime.bundle.outbox import emitted_events
from services.runtime.delivery.adopt import step_records

# The periodic pass, in heartbeats (10 s each by default: once a minute).
REPAIR_EVERY_HEARTBEATS = 6
# A run whose journal ends on one of these is finished: the periodic pass leaves it alone.
FINAL_SCHEMAS = ("report.published",)


def finished(journal: list[dict[str, Any]]) -> bool:
    last = str(journal[-1].get("schema", "")) if journal else ""
    return last in FINAL_SCHEMAS or last.endswith(".failed")


def _when(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def missing(bundle: BundleStore, run_id: str, journal: list[dict[str, Any]],
            before: datetime) -> list[tuple[dict[str, Any], LostEvent]]:
    """The run's events the bundle holds whole, produced before `before`, that `journal` lacks, oldest first."""
    journaled = {e.get("event_id") for e in journal}
    known: dict[str, tuple[dict[str, Any], str]] = {}
    for record in step_records(bundle, run_id):
        for out in record.outputs:
            known.setdefault(str(out.get("event_id")), (out, "step_record"))
    for event in emitted_events(bundle, run_id):
        known.setdefault(str(event.get("event_id")), (event, "emitted"))
    found = []
    for event_id, (event, source) in known.items():
        produced = _when(event.get("produced_at"))
        if event_id not in journaled and produced is not None and produced < before:
            found.append((event, LostEvent(event_id=event_id, schema_=event.get("schema"), produced_at=produced,
                                           known_from=source)))
    return sorted(found, key=lambda pair: (pair[1].produced_at, pair[1].event_id))


def named_before(bundle: BundleStore, run_id: str) -> set[str]:
    """Event IDs the run's earlier repair records already name."""
    named: set[str] = set()
    for ref in bundle.artifacts(run_id):
        _, relpath = parse_uri(ref.uri)
        if relpath.startswith(REPAIRS_DIR + "/"):
            named |= {e.event_id for e in RepairRecord.model_validate_json(bundle.read_bytes(run_id, relpath)).events}
    return named


def plan_repairs(
    bundle: BundleStore, before: datetime, *, all_runs: bool
) -> dict[str, tuple[list[dict[str, Any]], int]]:
    """Run -> (the events to publish again, how many of them no repair record named before); the new
    ones are recorded here (one repair record per run), before anything is published."""
    plans = {}
    for run_id in bundle.list_runs():
        journal = bundle.events(run_id)
        if not all_runs and finished(journal):
            continue
        found = missing(bundle, run_id, journal, before)
        if not found:
            continue
        already = named_before(bundle, run_id)
        new = [lost for _, lost in found if lost.event_id not in already]
        if new:
            noticed = utc_now()
            bundle.write_json(run_id, f"{REPAIRS_DIR}/{noticed.strftime('%Y%m%dT%H%M%S%fZ')}.json",
                              RepairRecord(repaired_at=noticed, events=new))
            bundle.rebuild_manifest(run_id)
        plans[run_id] = ([event for event, _ in found], len(new))
    return plans


async def repair(bundle: BundleStore, bus: Any, log: Any, settle_s: float, *, all_runs: bool) -> dict[str, int]:
    """One pass (module docstring): run -> how many events it published again."""
    before = utc_now() - timedelta(seconds=settle_s)
    try:
        plans = await asyncio.to_thread(plan_repairs, bundle, before, all_runs=all_runs)
    except (BundleError, OSError, ValueError) as exc:
        log.error("looking for recorded events the journal lacks failed; the next pass looks again",
                  error=f"{type(exc).__name__}: {exc}")
        return {}
    registry = default_registry()
    published: dict[str, int] = {}
    for run_id, (events, new) in plans.items():
        for raw in events:
            try:
                event = registry.parse(orjson.dumps(raw))
            except ContractError as exc:
                log.error("a recorded event cannot be read; not published again", run_id=run_id, error=str(exc))
                continue
            try:
                await bus.publish(event)
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                log.warning("could not publish a recorded event again; the next pass tries again",
                            run_id=run_id, event_id=event.event_id, error=f"{type(exc).__name__}: {exc}")
                return published
            published[run_id] = published.get(run_id, 0) + 1
        if new:
            log.warning("events the bundle recorded were missing from the journal; published again, same event IDs "
                        "(the manifest names them)", run_id=run_id, events=new,
                        schemas=sorted({str(e.get("schema")) for e in events}))
    return published


async def keep_repairing(bundle: BundleStore, bus: Any, log: Any, *, settle_s: float, every_s: float) -> None:
    """The periodic pass over the runs not finished, for as long as the journal runs."""
    while True:
        await asyncio.sleep(every_s)
        await repair(bundle, bus, log, settle_s, all_runs=False)
