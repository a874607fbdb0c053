"""A kill between an artifact's file and its index record (services/runtime/bundle/bundle.py): `write_bytes`
publishes a file whole, so a file there without its record is complete, and what reads the bundle as
the record of a step adopts it instead of producing it again (docs/delivery.md, "Durability").

The kill is stood for by removing the index record the second write made (the file stays)."""

from __future__ import annotations

from pathlib import Path

from services.runtime.bundle.bundle import BundleStore
from services.runtime.bundle.bundle_records import index_name
from services.runtime.delivery.adopt import step_record_path, step_records
from tests.unit.runtime.delivery.test_adopt_step import REQUEST, RUN, Bus, deliver


def unrecord(bundle: BundleStore, relpath: str) -> None:
    """The state a kill between the file and its index record leaves: the file, no record."""
    (bundle.run_dir(RUN) / ".index" / index_name(relpath)).unlink()
    assert (bundle.run_dir(RUN) / relpath).is_file()


def test_a_step_record_left_without_its_index_record_is_adopted_not_run_again(tmp_path: Path) -> None:
    bundle, bus = BundleStore(tmp_path, fsync=False), Bus()
    runs: list[str] = []
    deliver(bundle, REQUEST, runs, bus)
    unrecord(bundle, step_record_path("profiler", REQUEST.SCHEMA, REQUEST.event_id))
    assert list(step_records(bundle, RUN)) == []
    deliver(bundle, REQUEST, runs, bus)  # Redis lost the done mark too: the bundle decides
    assert runs == [REQUEST.event_id], "the step ran once"
    assert len(bus.published) == 2 and bus.published[0] == bus.published[1], "the recorded event, again"
    [record] = list(step_records(bundle, RUN))  # recorded on adoption: a later loss finds it
    assert record.outputs[0]["event_id"] == bus.published[0][1]


def test_adopt_records_a_whole_file_and_answers_none_without_one(tmp_path: Path) -> None:
    bundle = BundleStore(tmp_path, fsync=False)
    ref = bundle.write_bytes(RUN, "profile/PROFILE.json", b'{"profile": 1}')
    unrecord(bundle, "profile/PROFILE.json")
    assert bundle.adopt(RUN, "profile/PROFILE.json") == ref
    assert bundle.ref(RUN, "profile/PROFILE.json") == ref
    assert bundle.adopt(RUN, "profile/PROFILE.json") == ref
    assert bundle.adopt(RUN, "profile/none.json") is None
