"""A torn events.jsonl line (disk full, power loss mid-append; services/runtime/bundle/bundle_events.py):
kept aside, never an event, and the event it was appended whole once it comes again. The journal acks
an event only once its whole line is fsynced, so a torn append is always delivered again. The report is
a DRAFT only while an event a torn line names is missing from the journal."""

from __future__ import annotations

from pathlib import Path

import orjson

from services.runtime.bundle.bundle import BundleStore

RUN = "run-0001"


def _event(event_id: str) -> bytes:
    return orjson.dumps({"schema": "test.happened", "version": 1, "event_id": event_id, "pad": "x" * 50})


def _tear(store: BundleStore, line: bytes) -> None:
    with open(store.events_path(RUN), "ab") as fh:
        fh.write(line)  # a writer died mid-line (power loss, disk full)


def test_a_torn_line_is_kept_aside_and_its_event_appended_whole(tmp_path: Path) -> None:
    store = BundleStore(tmp_path, fsync=False)
    store.append_event(RUN, "e1", _event("e1"))
    _tear(store, _event("e2")[:60])
    again = BundleStore(tmp_path, fsync=False)  # the journal restarted; the stream delivers e2 again
    assert again.append_event(RUN, "e2", _event("e2")) is True
    scan = again.scan_events(RUN)
    assert [e["event_id"] for e in scan.events] == ["e1", "e2"]
    assert scan.bad_lines == [] and scan.missing == []
    [aside] = [orjson.loads(line) for line in (store.run_dir(RUN) / "events.torn.jsonl").read_bytes().splitlines()]
    assert aside["fragment"] == _event("e2")[:60].decode() and aside["event_id"] == "e2"
    assert store.events_path(RUN).read_bytes() == _event("e1") + b"\n" + _event("e2") + b"\n"


def test_the_report_is_a_draft_only_while_a_torn_line_names_an_event_the_journal_lacks(tmp_path: Path) -> None:
    from services.publisher.report.aggregate import journal_problems

    store = BundleStore(tmp_path, fsync=False)
    store.append_event(RUN, "e1", _event("e1"))
    _tear(store, _event("e2")[:60])
    assert store.scan_events(RUN).missing == ["e2"]
    assert journal_problems(store.scan_events(RUN)) == [
        "events.jsonl lacks 1 event a torn line names (e2): it comes back when delivered again"]
    store.append_event(RUN, "e2", _event("e2"))
    assert journal_problems(store.scan_events(RUN)) == []
    # A fragment too short to name its event: that append was never acked, so it was delivered again.
    _tear(store, b'{"schema":"te')
    store.append_event(RUN, "e3", _event("e3"))
    assert store.scan_events(RUN).missing == [] and journal_problems(store.scan_events(RUN)) == []
