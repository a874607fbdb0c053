"""The journal's repair pass (services/runtime/bundle/repair.py) on a bundle in a temporary folder: which
recorded events are published again, what the repair record and the manifest name, which runs the
periodic pass leaves alone."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from contracts.envelope import utc_now
from contracts.events import ProfileRequested
from services.runtime.bundle.bundle import BundleStore
from services.runtime.bundle.outbox import record_emitted
from services.runtime.bundle.repair import missing, plan_repairs
from tests.unit.runtime.bundle.test_gaps import RUN, step


def test_recorded_events_the_journal_lacks_are_planned_once_named_and_counted_once_journaled(tmp_path: Path) -> None:
    bundle = BundleStore(tmp_path, fsync=False)
    journaled = record_emitted(bundle, ProfileRequested(run_id=RUN, producer="cli/t", requested_by="t"))
    bundle.append_event(RUN, journaled.event_id, journaled.to_json())
    lost = record_emitted(bundle, ProfileRequested(run_id=RUN, producer="cli/t", requested_by="t"))
    out = step(bundle, journaled)  # a step record's output, never journaled
    later = utc_now() + timedelta(seconds=1)

    found = {
        lost_event.event_id: lost_event.known_from for _, lost_event in missing(bundle, RUN, bundle.events(RUN), later)
    }
    assert found == {lost.event_id: "emitted", out.event_id: "step_record"}
    assert missing(bundle, RUN, bundle.events(RUN), utc_now() - timedelta(hours=1)) == [], "too recent to be lost"

    first = plan_repairs(bundle, later, all_runs=True)
    assert {e["event_id"] for e in first[RUN][0]} == set(found) and first[RUN][1] == 2
    second = plan_repairs(bundle, later, all_runs=True)
    assert second[RUN][1] == 0, "still missing: published again, but not named again"
    bundle.rebuild_manifest(RUN)
    [repair] = bundle.read_manifest(RUN).repaired_events
    assert repair.count == 2 and repair.journaled == 0 and repair.record.startswith("journal/repairs/")
    bundle.append_event(RUN, lost.event_id, lost.to_json())
    bundle.append_event(RUN, out.event_id, out.to_json())
    bundle.rebuild_manifest(RUN)
    assert bundle.read_manifest(RUN).repaired_events[0].journaled == 2
    assert plan_repairs(bundle, later, all_runs=True) == {}


def test_the_periodic_pass_leaves_a_finished_run_alone(tmp_path: Path) -> None:
    bundle = BundleStore(tmp_path, fsync=False)
    record_emitted(bundle, ProfileRequested(run_id=RUN, producer="cli/t", requested_by="t"))
    bundle.append_event(RUN, "published-1", b'{"schema": "report.published", "event_id": "published-1"}')
    later = utc_now() + timedelta(seconds=1)
    assert plan_repairs(bundle, later, all_runs=False) == {}
    assert RUN in plan_repairs(bundle, later, all_runs=True), "a reset's pass looks at every run"


def test_a_retry_that_built_the_event_again_publishes_the_one_recorded_first(tmp_path: Path) -> None:
    bundle = BundleStore(tmp_path, fsync=False)
    first = record_emitted(bundle, ProfileRequested(run_id=RUN, producer="cli/t", requested_by="t"))
    rebuilt = ProfileRequested(run_id=RUN, producer="cli/other", requested_by="t", event_id=first.event_id)
    assert record_emitted(bundle, rebuilt) == first
