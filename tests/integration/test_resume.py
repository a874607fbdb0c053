"""`specdec resume RUN_ID` on a run whose trigger Redis lost while the services that would take it up are stopped.

The profiler recorded its step (services/runtime/delivery/adopt.py) and stopped; the journal never saw
profile.completed; Redis then restarted empty (a test-owned server, wiped), and neither the
profiler nor the corpus runs. `specdec resume` derives the next step (corpus) from the bundle and
publishes its trigger again as recorded, same event ID; a second resume publishes the same event.
An operator's `<step>.requested` in the journal is a trigger too, published again as it was.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import cast

import orjson
import redis

from contracts.events import ProfileCompleted, ProfileRequested
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.adopt import record_step, with_derived_ids
from services.runtime.delivery.broker import decode_entry
from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]


def resume(env: dict[str, str], run_id: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "services.cli.main", "resume", run_id, "--json"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return orjson.loads(proc.stdout)


def stream_ids(url: str, stream: str) -> list[str]:
    client = redis.Redis.from_url(url)
    try:
        # redis-py types replies for decode_responses too; this client's are bytes
        entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", client.xrange(stream))
        return [orjson.loads(decode_entry(fields)[0])["event_id"] for _, fields in entries]
    finally:
        client.close()


def test_resume_publishes_the_recorded_trigger_again_and_is_idempotent(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    prefix, root = f"res{uuid.uuid4().hex[:8]}", tmp_path / "bundles"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPECDEC_REDIS_URL": redis_server.url,
           "SPECDEC_STREAM_PREFIX": prefix, "SPECDEC_BUNDLE_ROOT": str(root)}
    bundle = BundleStore(root, fsync=False)
    run, bare = "resume-run-1", "resume-run-2"

    # The profiler's step, recorded in the bundle; its event reached neither the journal nor a consumer.
    trigger = ProfileRequested(run_id=run, producer="cli/t", requested_by="t")
    bundle.append_event(run, trigger.event_id, trigger.to_json())
    ref = bundle.write_json(run, "profile/PROFILE.json", {"profile": 1})
    done = trigger.caused(ProfileCompleted, producer="profiler/t", profile=ref, source="shapes", records_accepted=0,
                          records_rejected=0, recommended_method="ngram")
    [completed] = record_step(bundle, "profiler", trigger, trigger.event_id,
                              outputs=with_derived_ids("profiler", trigger, trigger.event_id, [done]))
    redis_server.kill()
    shutil.rmtree(redis_server.directory)
    redis_server.start()

    first, second = resume(env, run), resume(env, run)
    assert (first["step"], first["published"], first["source"]) == ("corpus", "profile.completed", "journal")
    assert first["event_id"] == second["event_id"] == completed.event_id
    assert stream_ids(redis_server.url, f"{prefix}.profile.completed") == [completed.event_id] * 2

    # An operator's request is a trigger too: published again as it was.
    request = ProfileRequested(run_id=bare, producer="cli/t", requested_by="t")
    bundle.append_event(bare, request.event_id, request.to_json())
    again = resume(env, bare)
    assert (again["step"], again["published"], again["event_id"]) == ("profile", "profile.requested", request.event_id)
