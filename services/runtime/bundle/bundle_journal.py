"""What a run's manifest says about its journal: the spans of events known lost (gap records,
services/runtime/bundle/gaps.py) and the events published again (repair records,
services/runtime/bundle/repair.py), each read against what events.jsonl holds now.

Only a run with such a record pays for reading its journal here."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from contracts.layout import GAPS_DIR, REPAIRS_DIR
from services.runtime.bundle.bundle_paths import ArtifactCorrupt, make_uri
from services.runtime.bundle.bundle_records import (
    EventGap,
    EventRepair,
    GapRecord,
    IndexRecord,
    RepairRecord,
    still_lost,
)


class BundleStore(Protocol):
    """What is read here of the store (services/runtime/bundle/bundle.py), which calls in."""

    def read_bytes(self, run_id: str, relpath: str, *, verify: bool = True) -> bytes: ...

    def events(self, run_id: str) -> list[dict[str, Any]]: ...


_Record = TypeVar("_Record", bound=BaseModel)


def _read(store: BundleStore, run_id: str, paths: list[str], model: type[_Record]) -> dict[str, _Record]:
    found = {}
    for path in paths:
        try:
            found[path] = model.model_validate_json(store.read_bytes(run_id, path))
        except ValidationError as err:
            raise ArtifactCorrupt(f"{make_uri(run_id, path)} is not a {model.__name__}: {err}") from err
    return found


def journal_spans(
    store: BundleStore, run_id: str, records: list[IndexRecord]
) -> tuple[list[EventGap], list[EventRepair]]:
    """The run's lost spans (its gap records less what events.jsonl holds now) and its repairs."""
    gap_paths = [r.path for r in records if r.path.startswith(GAPS_DIR + "/")]
    repair_paths = [r.path for r in records if r.path.startswith(REPAIRS_DIR + "/")]
    if not gap_paths and not repair_paths:
        return [], []
    journaled = {e["event_id"] for e in store.events(run_id) if isinstance(e.get("event_id"), str)}
    gaps = _read(store, run_id, gap_paths, GapRecord)
    repairs = []
    for path, record in sorted(_read(store, run_id, repair_paths, RepairRecord).items()):
        repairs.append(EventRepair(record=path, repaired_at=record.repaired_at, count=len(record.events),
                                   journaled=sum(e.event_id in journaled for e in record.events), events=record.events))
    return still_lost(gaps, journaled), repairs
