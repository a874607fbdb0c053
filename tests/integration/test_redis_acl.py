"""Only the operator can approve: an approval forged with the services' Redis credentials.

Redis runs with ACL users (infra/bin/redis-credentials): the services' user reads and
writes every stream and key but may not XADD `<prefix>.run.approved`; the operator's
user may. A forged approval is refused by Redis itself (NOPERM), so the plan it names
never runs; `specdec approve` with the services' URL says so in one line, and with the
operator's URL the plan runs and the journal's approval names the operator's Redis user.
The test owns its redis-server (conftest's `redis_server`), started as specdec starts one.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import redis
from redis.exceptions import NoPermissionError

from contracts.events import CapacitySelected, RunApproved
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.service import Service, bootstrap
from services.runtime.main import resources_for
from services.runtime.settings import RuntimeSettings
from services.shared.capacity.recheck import Recheck
from services.trainer_proxy import app
from tests.support.redis_server import RedisServer
from tests.support.services import running, wait_events
from tests.unit.trainer_proxy.helpers import PY, ROOT, campaign, seed_run, write_script


def _idle(bundle, camp, node, run_id) -> Recheck:
    return Recheck(idle=True, reasons=[], snapshot=None)


@asynccontextmanager
async def _proxy(settings: RuntimeSettings) -> AsyncIterator[Service]:
    resources = resources_for(settings, training_recheck=_idle)
    service = bootstrap(app.NAME, app.routes(resources), settings=settings, resources=resources)
    await service.start()
    try:
        yield service
    finally:
        await service.stop(grace_s=1.0)


def _approve(settings: RuntimeSettings, run_id: str, operator_url: str | None) -> subprocess.CompletedProcess[str]:
    """`specdec approve RUN` as its own process, with the services' URL and, when given, the operator's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECDEC_")}
    env.update(PYTHONPATH=str(ROOT), SPECDEC_REDIS_URL=settings.redis_url, SPECDEC_STREAM_PREFIX=settings.stream_prefix,
               SPECDEC_BUNDLE_ROOT=str(settings.bundle_root))
    if operator_url is not None:
        env["SPECDEC_OPERATOR_REDIS_URL"] = operator_url
    return subprocess.run([sys.executable, "-m", "services.cli.main", "approve", run_id,
                           "--i-understand-this-mutates-cluster"],
                          env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)


async def test_an_approval_forged_with_the_services_credentials_runs_nothing(redis_server: RedisServer, tmp_path: Path):
    settings = RuntimeSettings(redis_url=redis_server.services_url, stream_prefix=f"acl{uuid.uuid4().hex[:6]}",
                               bundle_root=tmp_path / "bundles", reclaim_idle_ms=1500, reclaim_poll_ms=100,
                               read_block_ms=100, shutdown_grace_s=2.0)
    bundle = BundleStore(settings.bundle_root)
    run_id = f"acl-{uuid.uuid4().hex[:8]}"
    ran = tmp_path / "trainer-ran"
    trainer = write_script(tmp_path / "trainer.py", f"open({str(ran)!r}, 'w').write('ran')\n")
    seed_run(bundle, run_id, campaign(train_argv=[PY, str(trainer)], acknowledged=True))
    approvals = f"{settings.stream_prefix}.run.approved"

    async with running("journal", settings), _proxy(settings) as service:
        snapshot = bundle.write_json(run_id, "capacity/snapshot.json", {"node": "local-node"})
        await service.bus.publish(CapacitySelected(run_id=run_id, producer="test", scheduler="local", node="local-node",
                                                   snapshot=snapshot))
        plan = (await wait_events(settings, {"training.planned"}, run_id=run_id))["training.planned"]["plan"]

        # The forgery: the plan's hash (readable in the bundle) on the approval stream, with the services' user.
        forged = RunApproved(run_id=run_id, producer="cli/attacker", i_understand_this_mutates_cluster=True,
                             plan_sha256s=[plan["sha256"]], approved_by="attacker@host")
        with pytest.raises(NoPermissionError):
            await service.bus.publish(forged)
        raw = redis.Redis.from_url(redis_server.services_url)
        try:
            with pytest.raises(NoPermissionError):
                raw.xadd(approvals, {"payload": b"{}"})
            assert raw.xlen(approvals) == 0
        finally:
            raw.close()

        # `specdec approve` with the services' credentials: refused in one line, nothing published.
        refused = await asyncio.to_thread(_approve, settings, run_id, None)
        assert refused.returncode != 0
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in refused.stderr, refused.stderr
        assert "SPECDEC_OPERATOR_REDIS_URL" in lines[0] and approvals in lines[0], lines[0]
        raw = redis.Redis.from_url(redis_server.operator_url)
        try:
            assert raw.xlen(approvals) == 0, "a refused approval reached the approval stream"
        finally:
            raw.close()
        await asyncio.sleep(0.3)
        assert not ran.exists(), "a forged approval ran the plan"

        # With the operator's credentials the same command approves, and the plan runs.
        approved = await asyncio.to_thread(_approve, settings, run_id, redis_server.operator_url)
        assert approved.returncode == 0, approved.stderr
        await wait_events(settings, {"training.started"}, run_id=run_id, timeout_s=30)
        for _ in range(100):
            if any(e["schema"] == "run.approved" for e in bundle.events(run_id)):
                break
            await asyncio.sleep(0.1)

    assert ran.read_text() == "ran"
    [record] = [e for e in bundle.events(run_id) if e["schema"] == "run.approved"]
    assert record["plan_sha256s"] == [plan["sha256"]]
    assert "specdec-operator" in record["approved_by"], record
    password = redis.connection.parse_url(redis_server.operator_url)["password"]
    assert password and password not in bundle.events_path(run_id).read_text()


def test_a_restarted_redis_keeps_what_scripts_and_transactions_wrote(tmp_path: Path) -> None:
    """Redis replays its AOF as the default user. With specdec's ACL file, whose default user is
    off, every script's and transaction's writes must come back after a restart: the ledger's done
    marks and leases are written that way (a default user without permissions lost them all)."""
    server = RedisServer(tmp_path / "redis", appendfsync="always")
    server.start()
    try:
        client = redis.Redis.from_url(server.url)
        client.eval("redis.call('SET', KEYS[1], ARGV[1])", 1, "acl-aof:script", "kept")
        with client.pipeline(transaction=True) as tx:
            tx.set("acl-aof:multi", "kept")
            tx.xadd("acl-aof:stream", {"a": "b"})
            tx.execute()
        client.close()
        server.kill()
        server.start()
        client = redis.Redis.from_url(server.url)
        assert client.get("acl-aof:script") == b"kept" and client.get("acl-aof:multi") == b"kept"
        assert client.xlen("acl-aof:stream") == 1
        client.close()
    finally:
        server.stop()
