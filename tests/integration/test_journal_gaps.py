"""The journal after a reset: events.jsonl takes what the new streams hold, and the manifest names
exactly the events Redis lost before the journal read them (services/runtime/bundle/gaps.py).

A real journal process (`python -m services.runtime.main journal`) on a test-owned Redis. The
test causes a known loss: with the journal stopped, an operator's request and the profiler's
step it triggered (recorded in the bundle, as services/runtime/delivery/adopt.py does) are published,
then Redis restarts empty. What the loss was is known to the test, and to the bundle: the
profiler's step record holds profile.completed whole (the journal publishes it again and the manifest
names it repaired) and names its trigger, profile.requested (named lost until published again).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from contracts.envelope import Event
from contracts.events import ProfileCompleted, ProfileRequested
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.adopt import record_step, with_derived_ids
from tests.support.publishing import publish_event
from tests.support.redis_server import RedisServer
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


def start_journal(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "services.runtime.main", "journal"],
                                env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(timeout=20)


def journaled(bundle: BundleStore, run: str) -> set[str]:
    return {e["event_id"] for e in bundle.events(run)} if bundle.events_path(run).exists() else set()


def named(bundle: BundleStore, run: str) -> dict[str, tuple[str, str | None]]:
    """The manifest's lost events: event_id -> (known_from, schema)."""
    if not bundle.manifest_path(run).exists():
        return {}
    return {e.event_id: (e.known_from, e.schema_)
            for span in bundle.read_manifest(run).lost_events for e in span.events}


def repaired(bundle: BundleStore, run: str) -> set[str]:
    """The manifest's repaired events (published again by the journal)."""
    if not bundle.manifest_path(run).exists():
        return set()
    return {e.event_id for span in bundle.read_manifest(run).repaired_events for e in span.events}


def test_manifest_names_the_events_redis_lost_before_the_journal_read_them(redis_server: RedisServer,
                                                                             tmp_path: Path) -> None:
    prefix, root, log = f"gap{uuid.uuid4().hex[:8]}", tmp_path / "bundles", tmp_path / "journal.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPECDEC_REDIS_URL": redis_server.url,
           "SPECDEC_STREAM_PREFIX": prefix, "SPECDEC_BUNDLE_ROOT": str(root),
           "SPECDEC_RECLAIM_IDLE_MS": "1500", "SPECDEC_READ_BLOCK_MS": "200"}  # settle period 0.75 s
    bundle = BundleStore(root, fsync=False)
    run = "gaps-run-1"

    def publish(event: Event) -> None:
        publish_event(redis_server.url, prefix, event)

    journal = start_journal(env, log)
    try:
        first = ProfileRequested(run_id=run, producer="cli/t", requested_by="t")
        publish(first)
        wait_for(lambda: journaled(bundle, run) == {first.event_id}, 30, "the journal to append the first event")
        stop(journal)

        # The loss: published while the journal is stopped, gone with Redis before it reads them.
        request = ProfileRequested(run_id=run, producer="cli/t", requested_by="t")
        publish(request)
        ref = bundle.write_json(run, "profile/PROFILE.json", {"profile": 1})
        done = request.caused(ProfileCompleted, producer="profiler/t", profile=ref, source="shapes",
                              records_accepted=0, records_rejected=0, recommended_method="ngram")
        [completed] = record_step(bundle, "profiler", request, request.event_id,
                                  outputs=with_derived_ids("profiler", request, request.event_id, [done]))
        publish(completed)
        redis_server.kill()
        shutil.rmtree(redis_server.directory)
        redis_server.start()

        later = ProfileRequested(run_id=run, producer="cli/t", requested_by="t")
        publish(later)  # on the new streams before the journal is back
        journal = start_journal(env, log)
        # The step record holds profile.completed whole: the journal's repair pass publishes it again
        # (services/runtime/bundle/repair.py) and the manifest names it repaired; the request is only
        # named by the record, so it stays named lost.
        lost = {request.event_id: ("reference", "profile.requested")}
        wait_for(lambda: named(bundle, run) == lost and repaired(bundle, run) == {completed.event_id}
                 and completed.event_id in journaled(bundle, run), 30,
                 f"the manifest to name the loss and the repair: {log.read_text()[-2000:]}")
        wait_for(lambda: later.event_id in journaled(bundle, run), 10, "the journal to append the new stream's event")
        assert journaled(bundle, run) == {first.event_id, later.event_id, completed.event_id}
        [span] = bundle.read_manifest(run).lost_events
        assert span.count == 1 and span.first_produced_at is None and span.events[0].referenced_by is not None
        assert span.redis_state_since > completed.produced_at
        assert span.record.startswith("journal/gaps/")
        assert log.read_text().count("events Redis lost before the journal read them") == 1

        # Published again with its event ID (as `specdec resume` does): journaled, no longer lost.
        publish(request)
        wait_for(lambda: named(bundle, run) == {}, 10, "the manifest to drop the event the journal received")
        assert journaled(bundle, run) == {first.event_id, later.event_id, completed.event_id, request.event_id}
    finally:
        if journal.poll() is None:
            stop(journal)
