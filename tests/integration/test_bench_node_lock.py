"""Issue 40: two campaigns' benches on one node run one after the other, never together.

Both runs' bench steps start at once (one bench-runner handling two entries at a time, as when both
approvals arrive in one read). Each stand-in server writes when it started serving and when SIGTERM
ended it: no server of one run may be up while a server of the other is. The second run's bench waits
for the first (queued, neither failed nor dead-lettered), and `specdec status` says so meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from contracts.campaign import Campaign
from contracts.events import BenchRequested
from services.app.context import Session
from services.app.runs import ops
from services.runtime.bundle.bundle import BundleStore
from tests.integration.test_bench_service import bench_runner, campaign
from tests.support.services import wait_events

RUNS = ("toy-20261203-010101-aaaaaa", "toy-20261203-020202-bbbbbb")


def _campaign(log: Path) -> Campaign:
    data = campaign(acknowledged=True, pre_approve=("bench",)).model_dump(by_alias=True)
    data["matrix"]["exploratory"] = True  # one trial per cell: the order of launches is what is tested
    data["matrix"]["cells"] = data["matrix"]["cells"][:2]  # the standing cell and one candidate
    for cell in data["matrix"]["cells"]:
        cell["concurrency"] = [1]
        cell["trials"] = 1
        cell["vllm_sweep"]["serve_cmd"] += ["--fake-lifetime-log", str(log)]
    return Campaign.model_validate(data)


def _intervals(log: Path) -> list[tuple[float, float]]:
    """(start, exit) of each server of one run, in order; every server must have ended."""
    words = [line.split() for line in log.read_text().splitlines()]
    starts = [float(t) for w, t in words if w == "start"]
    exits = [float(t) for w, t in words if w == "exit"]
    assert len(starts) == len(exits) == 2, words  # two launches, each ended by SIGTERM
    return list(zip(starts, exits, strict=True))


async def _status(session: Session, run_id: str) -> dict:
    """What `specdec status RUN --json` prints: the use case it renders, called in this process (a CLI
    process per poll would cost more than the bench it watches on a small machine)."""
    return (await ops.status(session, run_id)).model_dump()


@pytest.mark.timeout(240)
async def test_two_runs_on_one_node_bench_one_after_the_other(settings, tmp_path):
    settings = settings.model_copy(update={"max_concurrency": 2})
    bundle = BundleStore(settings.bundle_root)
    logs = {run: tmp_path / f"{run}.lifetimes" for run in RUNS}
    for run in RUNS:
        bundle.write_json(run, "campaign.json", _campaign(logs[run]))
    seen_queued: list[dict] = []
    session = Session(settings, bundle, aioredis.Redis.from_url(settings.operator_redis_url))
    async with bench_runner(settings) as service:
        for run in RUNS:
            await service.bus.publish(BenchRequested(run_id=run, producer="test", requested_by="test"))
        # Whichever run launched first holds the node; the other one's status says it waits behind it.
        deadline = time.monotonic() + 120
        while not seen_queued and time.monotonic() < deadline:
            for run in RUNS:
                status = await _status(session, run)
                bench = next(s for s in status["steps"] if s["step"] == "bench")
                if bench["state"] == "queued":
                    seen_queued.append({"run": run, **bench, "stalled": status.get("stalled")})
            await asyncio.sleep(0.2)
        done = {run: await wait_events(settings, {"bench.completed"}, run_id=run, timeout_s=180) for run in RUNS}
    await session.client.aclose()

    for run in RUNS:
        assert "bench.completed" in done[run], done[run]
        assert done[run]["bench.completed"]["failed_cells"] == {}, "a waiting run's cells must not fail"
    first, second = sorted(RUNS, key=lambda run: _intervals(logs[run])[0][0])
    first_end = max(exit_ for _, exit_ in _intervals(logs[first]))
    second_start = min(start for start, _ in _intervals(logs[second]))
    assert second_start > first_end, (
        f"{second} launched at {second_start}, before {first}'s last server ended at {first_end}")

    assert seen_queued, "status never showed a run queued"  # (also when one bench ran after the other by chance)
    queued = seen_queued[0]
    assert queued["run"] == second and queued["detail"].startswith(f"queued behind {first}"), queued
    assert queued["stalled"] is None
    # The lock's token was checked and recorded at each launch, the same token throughout one run's bench.
    for run in RUNS:
        tokens = {bundle.read_json(run, str(path.relative_to(bundle.run_dir(run))))["token"]
                  for path in bundle.run_dir(run).glob("bench/*/launch-*/node-lock.json")}
        assert len(tokens) == 1, (run, tokens)


async def test_a_holder_that_lost_the_node_lock_cannot_launch(settings):
    """Fencing: once another run holds the node (this one's lock expired meanwhile), the pre-launch check refuses."""
    import structlog

    from services.bench.node_lock import NodeLockLost, hold
    from services.runtime.delivery.ledger import RedisLedger

    client = aioredis.Redis.from_url(settings.redis_url)
    ledger = RedisLedger(client, settings.stream_prefix)
    log = structlog.get_logger()
    try:
        async with hold(ledger, RUNS[0], "a", ["node-1"], ttl_ms=300, renew_s=60, log=log) as first:
            await first.check("node-1")  # held: the launch may go on
            await asyncio.sleep(0.5)  # no renewal (a paused holder): the lock expires
            async with hold(ledger, RUNS[1], "b", ["node-1"], ttl_ms=5000, renew_s=60, log=log) as second:
                with pytest.raises(NodeLockLost, match="node node-1 is no longer this run's"):
                    await first.check("node-1")
                await second.check("node-1")
        # Released on the way out: the next run takes the node at once.
        async with hold(ledger, RUNS[0], "c", ["node-1"], ttl_ms=5000, renew_s=60, log=log) as third:
            await third.check("node-1")
    finally:
        await client.aclose()
