"""The journal's gap records and the manifest's lost_events (services/runtime/bundle/gaps.py), on a bundle in a
temporary folder: which events are named lost, which are not, and how a span shrinks."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from contracts.envelope import Event, utc_now
from contracts.events import ProfileCompleted, ProfileRequested
from services.runtime.bundle.bundle import BundleStore
from services.runtime.bundle.gaps import find_lost, record_gaps
from services.runtime.delivery.adopt import record_step, with_derived_ids

RUN = "gaps-unit-1"


def step(bundle: BundleStore, trigger: Event) -> Event:  # a ProfileRequested in, its ProfileCompleted out
    ref = bundle.write_json(RUN, f"profile/{trigger.event_id}.json", {"profile": 1})
    done = trigger.caused(ProfileCompleted, producer="profiler/t", profile=ref, source="shapes", records_accepted=0,
                          records_rejected=0, recommended_method="ngram")
    [out] = record_step(bundle, "profiler", trigger, trigger.event_id,
                        outputs=with_derived_ids("profiler", trigger, trigger.event_id, [done]))
    return out


def test_known_events_missing_from_the_journal_are_named_and_leave_the_span_once_journaled(tmp_path: Path) -> None:
    bundle = BundleStore(tmp_path, fsync=False)
    journaled = ProfileRequested(run_id=RUN, producer="cli/t", requested_by="t")
    bundle.append_event(RUN, journaled.event_id, journaled.to_json())
    seen_out = step(bundle, journaled)  # its trigger journaled, its output not
    unseen = ProfileRequested(run_id=RUN, producer="cli/t", requested_by="t")
    unseen_out = step(bundle, unseen)  # neither journaled
    reset = utc_now()

    lost = {e.event_id: (e.known_from, e.schema_) for e in find_lost(bundle, RUN, reset)}
    assert lost == {seen_out.event_id: ("step_record", "profile.completed"),
                    unseen_out.event_id: ("step_record", "profile.completed"),
                    unseen.event_id: ("reference", "profile.requested")}
    assert find_lost(bundle, RUN, reset - timedelta(hours=1)) == [], "events produced after the cutoff are not lost"

    assert set(record_gaps(bundle, reset)) == {RUN}
    assert record_gaps(bundle, reset) == {}, "a second pass names nothing already named"
    [span] = bundle.read_manifest(RUN).lost_events
    assert span.count == 3

    bundle.append_event(RUN, seen_out.event_id, seen_out.to_json())  # published again, journaled
    bundle.rebuild_manifest(RUN)
    [span] = bundle.read_manifest(RUN).lost_events
    assert {e.event_id for e in span.events} == {unseen_out.event_id, unseen.event_id} and span.count == 2
    for event in (unseen, unseen_out):
        bundle.append_event(RUN, event.event_id, event.to_json())
    bundle.rebuild_manifest(RUN)
    assert bundle.read_manifest(RUN).lost_events == [], "a span whose events all came back is dropped"


def test_a_run_whose_journal_misses_nothing_gets_no_gap_record(tmp_path: Path) -> None:
    bundle = BundleStore(tmp_path, fsync=False)
    trigger = ProfileRequested(run_id=RUN, producer="cli/t", requested_by="t")
    out = step(bundle, trigger)
    for event in (trigger, out):
        bundle.append_event(RUN, event.event_id, event.to_json())
    assert record_gaps(bundle, utc_now()) == {}
    bundle.rebuild_manifest(RUN)
    assert bundle.read_manifest(RUN).lost_events == []
    assert not (tmp_path / RUN / "journal").exists()
