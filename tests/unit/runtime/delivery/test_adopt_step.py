"""The bundle decides what is done (services/runtime/delivery/adopt.py).

A step that declares its completing outputs is recorded in the bundle before they are
published; a delivery whose ledger lost the step (a new, empty MemoryLedger stands for
Redis restarted empty) re-emits the recorded events, same event IDs, without running.
A new trigger (`specdec request`) runs again; an artifact changed since the record makes
the step run again; output IDs are derived from (run, step, trigger).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import contracts
from contracts.events import ProfileCompleted, ProfileRequested
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.adopt import step_record_path, step_records, with_derived_ids
from services.runtime.delivery.consumer import Consumer, Route
from services.runtime.delivery.ledger import MemoryLedger
from services.runtime.resources import Resources
from services.runtime.settings import RuntimeSettings

RUN = "toy-run-1"
REQUEST = ProfileRequested(run_id=RUN, producer="t", requested_by="t")


class Bus:
    deadletter = "dlq"

    def __init__(self) -> None:
        self.published: list[tuple[str, str]] = []

    async def publish(self, event) -> None:
        self.published.append((event.SCHEMA, event.event_id))

    async def publish_raw(self, stream, body, headers, correlation_id) -> None:
        raise AssertionError(f"dead-lettered: {body!r}")


class OneDelivery:
    stream, consumer, group, message_id = "s.profile.requested", "c", "", "1-0"

    def __init__(self, event) -> None:
        self.body = event.to_json()

    async def delivery_count(self) -> int:
        return 1

    async def ack(self) -> None:
        pass


def deliver(bundle: BundleStore, event, runs: list[str], bus: Bus) -> None:
    async def handler(trigger, ctx):
        runs.append(trigger.event_id)
        ref = bundle.write_json(trigger.run_id, "profile/PROFILE.json", {"profile": 1})
        return [trigger.caused(ProfileCompleted, producer="t", profile=ref, source="shapes", records_accepted=0,
                               records_rejected=0, recommended_method="ngram")]

    # A fresh ledger each time: Redis lost its done marks.
    consumer = Consumer(service="profiler", settings=RuntimeSettings(), registry=contracts.default_registry(),
                        ledger=MemoryLedger(), bus=bus,  # type: ignore[arg-type]  # a recording double
                        resources=Resources(bundle=bundle))
    route = Route("profile.requested", handler, step_key=lambda e: e.event_id, outputs=(ProfileCompleted.SCHEMA,))
    asyncio.run(consumer.handle(route, OneDelivery(event)))  # type: ignore[arg-type]  # a stand-in for Delivered


def test_a_recorded_step_re_emits_the_same_event_instead_of_running(tmp_path: Path) -> None:
    bundle, bus = BundleStore(tmp_path, fsync=False), Bus()
    runs: list[str] = []
    deliver(bundle, REQUEST, runs, bus)
    deliver(bundle, REQUEST, runs, bus)
    assert runs == [REQUEST.event_id], "the step ran once"
    assert len(bus.published) == 2 and bus.published[0] == bus.published[1], "the same event, twice"
    [record] = list(step_records(bundle, RUN))
    assert record.trigger_event_id == REQUEST.event_id and record.outputs[0]["event_id"] == bus.published[0][1]


def test_a_new_request_runs_again(tmp_path: Path) -> None:
    bundle, bus = BundleStore(tmp_path, fsync=False), Bus()
    runs: list[str] = []
    deliver(bundle, REQUEST, runs, bus)
    again = ProfileRequested(run_id=RUN, producer="t", requested_by="t")
    deliver(bundle, again, runs, bus)
    assert runs == [REQUEST.event_id, again.event_id]
    assert bus.published[0][1] != bus.published[1][1]


def test_a_record_whose_artifact_is_no_longer_recorded_runs_again(tmp_path: Path) -> None:
    bundle, bus = BundleStore(tmp_path, fsync=False), Bus()
    runs: list[str] = []
    deliver(bundle, REQUEST, runs, bus)
    # The artifact's index record is gone (a bundle restored without it): the step must run.
    for index in (tmp_path / RUN / ".index").iterdir():
        if b"PROFILE.json" in index.read_bytes():
            index.unlink()
    deliver(bundle, REQUEST, runs, bus)
    assert runs == [REQUEST.event_id, REQUEST.event_id]
    assert bus.published[0][1] == bus.published[1][1], "a re-run of the same trigger emits the same event ID"


def test_output_ids_are_derived_from_run_step_and_trigger() -> None:
    out = REQUEST.caused(ProfileCompleted, producer="t", source="shapes", records_accepted=0, records_rejected=0,
                         recommended_method="ngram",
                         profile={"uri": f"bundle://{RUN}/p.json", "sha256": "0" * 64, "size_bytes": 0})
    first = with_derived_ids("profiler", REQUEST, REQUEST.event_id, [out, out])
    second = with_derived_ids(
        "profiler", REQUEST, REQUEST.event_id, [out.model_copy(update={"event_id": "x" * 32})] * 2
    )
    assert [e.event_id for e in first] == [e.event_id for e in second]
    assert first[0].event_id != first[1].event_id, "two outputs of one schema get two IDs"
    other = with_derived_ids("profiler", ProfileRequested(run_id=RUN, producer="t", requested_by="t"), "k", [out])
    assert other[0].event_id != first[0].event_id
    assert step_record_path("profiler", "profile.requested", "step") == "steps/profiler/profile.requested/step.json"
