"""`status` and `approve` read the run's journal and only the stream entries the journal has not
taken yet, so their cost does not grow with the streams (issue 40, scenario 8).

Before, both read every entry of every stream (0.45 s per 100,000 events), and approve found a plan
only while its event was still on its stream: once streams are trimmed (services/journal/trim.py),
a plan lives on in the run's events.jsonl alone. Real Redis and a real bundle; the journal's consumer
group is driven by hand as the journal drives it (deliver, append to events.jsonl, ack), with the
journal's own `record`. The client counts the stream entries the use case reads.
"""

from __future__ import annotations

import asyncio
from typing import cast

import redis.asyncio as aioredis

from contracts.events import ProfileRequested, TrainingPlanned
from services.app.context import Session
from services.app.runs import ops
from services.journal.app import record
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.broker import decode_entry
from services.runtime.settings import RuntimeSettings

OTHER_EVENTS = 300


class Counting(aioredis.Redis):
    """A real Redis client that counts the stream entries it reads back."""

    entries_read = 0

    async def xrange(self, *args, **kwargs):
        found = await super().xrange(*args, **kwargs)
        Counting.entries_read += len(found)
        return found

    async def xread(self, *args, **kwargs):
        found = await super().xread(*args, **kwargs)
        Counting.entries_read += sum(len(entries) for _, entries in (found or []))
        return found


async def journal_takes(client: aioredis.Redis, bundle: BundleStore, stream: str) -> None:
    """What the journal does with every new entry of `stream`: append it to its run's events.jsonl, ack it."""
    from contracts.registry import default_registry

    registry = default_registry()
    await client.xgroup_create(stream, "journal", id="0", mkstream=True)
    while reply := await client.xreadgroup("journal", "journal-1", {stream: ">"}, count=500):
        # redis-py types replies for decode_responses too; this client's are bytes, one stream's entries.
        [(_, entries)] = cast("list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]", reply)
        for entry_id, fields in entries:
            record(bundle, registry.parse(decode_entry(fields)[0]))
            await client.xack(stream, "journal", entry_id)


def test_status_and_approve_read_the_journal_and_only_the_untaken_tail(settings: RuntimeSettings) -> None:
    run = "cost-run-1"
    bundle = BundleStore(settings.bundle_root, fsync=False)
    plan = bundle.write_json(run, "training/plan.json", {"argv": ["train"], "node": "n1"})
    planned = TrainingPlanned(run_id=run, producer="trainer-proxy/t", plan=plan, executor="local", node="n1")
    tail = ProfileRequested(run_id=run, producer="cli/t", requested_by="t")

    async def go() -> None:
        client = Counting.from_url(settings.redis_url)
        session = Session(settings=settings, bundle=bundle, client=client)
        prefix = settings.stream_prefix
        try:
            for i in range(OTHER_EVENTS):  # other runs' events, all journaled: nothing of them is read
                await session.bus.publish(ProfileRequested(run_id=f"other-{i % 7}", producer="cli/t", requested_by="t"))
            await session.bus.publish(planned)
            for stream in (f"{prefix}.profile.requested", f"{prefix}.training.planned"):
                await journal_takes(client, bundle, stream)
            # The plan's stream was trimmed: the event lives on in the run's events.jsonl alone.
            await client.xtrim(f"{prefix}.training.planned", maxlen=0)
            await session.bus.publish(tail)  # on its stream, not yet journaled

            Counting.entries_read = 0
            status = await ops.status(session, run)
            assert Counting.entries_read <= 1, f"status read {Counting.entries_read} stream entries"
            assert status.events == 2, "the plan from the journal, the request from its stream"
            Counting.entries_read = 0
            approved = await ops.approve(session, run, acknowledged=True)
            assert Counting.entries_read <= 1, f"approve read {Counting.entries_read} stream entries"
            assert approved.plan_sha256s == [plan.sha256], "the plan is found in the journal"
        finally:
            await session.close()
            await client.aclose()

    asyncio.run(go())
