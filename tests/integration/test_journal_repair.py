"""Events the bundle recorded and Redis lost without a reset are published again (services/runtime/bundle/repair.py).

Redis losing its last second of AOF (appendfsync everysec, power loss) keeps its groups and ledger:
no reset is detected, the entries are simply gone. A real journal process on a test-owned Redis; the
bundle holds what the loss leaves: `campaign.submitted`, recorded by the submit as it publishes it,
and the profiler's step record holding its `profile.completed`, neither on any stream. The journal's
repair pass publishes both again, same event IDs, so the run goes on (the profiler reads the campaign
from its stream) and the manifest names what was repaired.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import cast

import redis

from contracts import layout
from contracts.campaign import Campaign
from contracts.events import CampaignSubmitted, ProfileCompleted
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.adopt import record_step, with_derived_ids
from services.runtime.delivery.broker import decode_entry
from tests.support.redis_server import RedisServer
from tests.support.waiting import wait_for
from tests.unit.bench.planning.test_plan import example

ROOT = Path(__file__).resolve().parents[2]


def journaled(bundle: BundleStore, run: str) -> set[str]:
    return {e["event_id"] for e in bundle.events(run)} if bundle.events_path(run).exists() else set()


def repaired(bundle: BundleStore, run: str) -> dict[str, str]:
    if not bundle.manifest_path(run).exists():
        return {}
    manifest = bundle.read_manifest(run)
    return {e.event_id: e.known_from for span in manifest.repaired_events for e in span.events}


def test_the_journal_publishes_again_what_the_bundle_recorded_and_redis_lost(redis_server: RedisServer,
                                                                             tmp_path: Path) -> None:
    from services.runtime.bundle.outbox import record_emitted

    prefix, root, log = f"rep{uuid.uuid4().hex[:8]}", tmp_path / "bundles", tmp_path / "journal.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPECDEC_REDIS_URL": redis_server.url,
           "SPECDEC_STREAM_PREFIX": prefix, "SPECDEC_BUNDLE_ROOT": str(root),
           "SPECDEC_RECLAIM_IDLE_MS": "1500", "SPECDEC_READ_BLOCK_MS": "200"}  # settle period 0.75 s
    bundle = BundleStore(root, fsync=False)
    run = "repair-run-1"
    campaign = Campaign.model_validate(example())
    ref = bundle.write_json(run, layout.CAMPAIGN, campaign.model_dump(mode="json"))
    # What `specdec submit` records before it publishes; the XADD then went with the AOF's last second.
    submitted = record_emitted(bundle, CampaignSubmitted(run_id=run, producer="cli/t", campaign=campaign,
                                                         campaign_ref=ref))
    profile = bundle.write_json(run, "profile/PROFILE.json", {"profile": 1})
    done = submitted.caused(ProfileCompleted, producer="profiler/t", profile=profile, source="shapes",
                            records_accepted=0, records_rejected=0, recommended_method="ngram")
    [completed] = record_step(bundle, "profiler", submitted, "step",
                              outputs=with_derived_ids("profiler", submitted, "step", [done]))

    with log.open("ab") as out:
        journal = subprocess.Popen([sys.executable, "-m", "services.runtime.main", "journal"],
                                   env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        want = {submitted.event_id: "emitted", completed.event_id: "step_record"}
        wait_for(lambda: repaired(bundle, run) == want, 30,
                 f"the manifest to name the repair: {log.read_text()[-2000:]}")
        wait_for(lambda: journaled(bundle, run) == set(want), 10, "the journal to append what was published again")
        assert bundle.read_manifest(run).lost_events == [], "what came back is not lost"
        client = redis.Redis.from_url(redis_server.url)
        try:
            # redis-py types replies for decode_responses too; this client's are bytes
            entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", client.xrange(f"{prefix}.campaign.submitted"))
        finally:
            client.close()
        # On its stream again, as submitted: the profiler takes the run up from there.
        assert [decode_entry(fields)[0] for _, fields in entries] == [submitted.to_json()]
        assert log.read_text().count("published again") == 1
    finally:
        journal.terminate()
        journal.wait(timeout=20)
