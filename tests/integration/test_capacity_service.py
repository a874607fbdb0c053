"""The capacity service through a real Redis: corpus.completed or
capacity.requested in, capacity.selected / unavailable / failed out, with the
snapshot and raw outputs in the run's bundle. The operator's idle check runs
only for a run that carries the typed acknowledgement; without it (a dry run)
the step selects from the read-only view and says so."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import orjson
import pytest
import redis.asyncio as aioredis
import yaml

from contracts.campaign import Campaign
from contracts.events import CapacityRequested, CorpusCompleted
from services.capacity import app
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.broker import decode_entry
from services.runtime.delivery.service import Service, bootstrap
from services.runtime.main import resources_for
from services.runtime.settings import RuntimeSettings
from services.shared.capacity.model import CapacitySnapshot
from services.shared.scheduler.runner import SubprocessRunner

ROOT = Path(__file__).resolve().parents[2]
RUN = "toy-20261130-000000-5e4v1c"


def campaign(idle_exit: int) -> Campaign:
    """An acknowledged campaign (the idle check runs only for one) on this machine."""
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["capacity"] = {"scheduler": "local", "selectors": {},
                        "idle_check": [sys.executable, "-c", f"import sys; sys.exit({idle_exit})", "{node}"]}
    data["acknowledgements"]["i_understand_this_mutates_cluster"] = True
    return Campaign.model_validate(data)


@pytest.fixture
async def service(settings: RuntimeSettings) -> AsyncIterator[tuple[Service, BundleStore]]:
    bundle = BundleStore(settings.bundle_root)
    resources = resources_for(settings, bundle=bundle)
    svc = bootstrap(app.NAME, app.routes(resources), settings=settings, resources=resources)
    await svc.start()
    try:
        yield svc, bundle
    finally:
        await svc.stop(grace_s=2)


async def next_event(settings: RuntimeSettings, schema: str, timeout_s: float = 30) -> dict[str, Any]:
    client = aioredis.Redis.from_url(settings.redis_url)
    try:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while asyncio.get_running_loop().time() < deadline:
            stream = f"{settings.stream_prefix}.{schema}"
            # redis-py types replies for decode_responses too; this client's are bytes
            entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", await client.xrange(stream))
            if entries:
                return orjson.loads(decode_entry(entries[0][1])[0])
            await asyncio.sleep(0.1)
    finally:
        await client.aclose()
    raise AssertionError(f"no {schema} within {timeout_s} s")


def corpus_completed() -> CorpusCompleted:
    return CorpusCompleted(run_id=RUN, producer="corpus/test", corpus=None, manifest=None, train_records=0,
                           heldout_records=0, skipped_reason="shapes-only campaign")


def snapshot_of(bundle: BundleStore, event: dict[str, Any]) -> CapacitySnapshot:
    relpath = event["snapshot"]["uri"].removeprefix(f"bundle://{RUN}/")
    assert relpath.startswith("capacity/")
    return CapacitySnapshot.model_validate(bundle.read_json(RUN, relpath))


async def test_corpus_completed_selects_this_idle_machine(service, settings):
    svc, bundle = service
    bundle.write_json(RUN, "campaign.json", campaign(idle_exit=0))
    trigger = corpus_completed()
    await svc.bus.publish(trigger)
    selected = await next_event(settings, "capacity.selected")
    snapshot = snapshot_of(bundle, selected)
    # Fails (with the reasons seen) when this machine runs a labelled process or a vLLM server.
    assert snapshot.idle, snapshot.reasons
    assert selected["causation_id"] == trigger.event_id and selected["scheduler"] == "local"
    assert selected["node"] == snapshot.node == snapshot.nodes[0].name
    names = [c.name for c in snapshot.captures]
    assert names[:3] == ["proc-meminfo", "proc-loadavg", "processes"] and names[-1].startswith("idle-check-")
    meminfo = snapshot.captures[0].stdout.uri.removeprefix(f"bundle://{RUN}/")
    assert b"MemTotal" in bundle.read_bytes(RUN, meminfo)


async def test_failing_idle_check_is_unavailable_with_the_reason(service, settings):
    svc, bundle = service
    bundle.write_json(RUN, "campaign.json", campaign(idle_exit=1))
    await svc.bus.publish(CapacityRequested(run_id=RUN, producer="cli", requested_by="test@host"))
    unavailable = await next_event(settings, "capacity.unavailable")
    node = snapshot_of(bundle, unavailable).nodes[0].name
    assert unavailable["reasons"] == [
        f"node {node}: idle check {[sys.executable, '-c', 'import sys; sys.exit(1)', node]!r} exited 1 (0 means idle)"
    ]


async def test_run_without_a_campaign_fails_the_capacity_step(service, settings):
    svc, _ = service
    await svc.bus.publish(corpus_completed())
    failed = await next_event(settings, "capacity.failed")
    assert failed["step"] == "capacity" and failed["error_type"] == "CampaignMissing"
    assert "no campaign.json" in failed["reason"]



@pytest.fixture(scope="session")
def slurm_env() -> dict[str, str]:
    done = subprocess.run([str(ROOT / "infra/bin/ensure-slurm")], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        pytest.fail(f"infra/bin/ensure-slurm exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


@pytest.fixture
async def slurm_service(settings: RuntimeSettings, slurm_env) -> AsyncIterator[tuple[Service, BundleStore]]:
    """The capacity service reading the real single-node Slurm of infra/bin/ensure-slurm."""
    bundle = BundleStore(settings.bundle_root)
    resources = resources_for(settings, bundle=bundle, capacity_runner=SubprocessRunner(slurm_env))
    svc = bootstrap(app.NAME, app.routes(resources), settings=settings, resources=resources)
    await svc.start()
    try:
        yield svc, bundle
    finally:
        await svc.stop(grace_s=2)


def hostile_campaign(tmp_path: Path, *, acknowledged: bool) -> tuple[Campaign, Path]:
    """A Slurm campaign whose idle check leaves a marker behind when it runs (and says idle), as any program a
    campaign names could."""
    marker, program = tmp_path / "idle-check-ran", tmp_path / "idle-check"
    program.write_text(f"#!/bin/sh\ntouch {marker}\nexit 0\n")
    program.chmod(0o755)
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["capacity"] = {"scheduler": "slurm", "selectors": {}, "idle_check": [str(program), "{node}"]}
    data["acknowledgements"]["i_understand_this_mutates_cluster"] = acknowledged
    return Campaign.model_validate(data), marker


async def test_unacknowledged_run_selects_without_running_the_idle_check(slurm_service, settings, tmp_path):
    svc, bundle = slurm_service
    camp, marker = hostile_campaign(tmp_path, acknowledged=False)
    bundle.write_json(RUN, "campaign.json", camp)
    await svc.bus.publish(corpus_completed())
    selected = await next_event(settings, "capacity.selected")
    snapshot = snapshot_of(bundle, selected)
    assert not marker.exists()
    assert snapshot.idle and selected["node"] == snapshot.node
    assert [c.name for c in snapshot.captures] == ["sinfo", "squeue"]
    assert all(v.idle_check is None for v in snapshot.verdicts)
    assert snapshot.idle_check_skipped is not None and "not acknowledged" in snapshot.idle_check_skipped
    assert "re-check" in snapshot.idle_check_skipped
    assert selected["idle_check_skipped"] == snapshot.idle_check_skipped


async def test_acknowledged_run_runs_the_idle_check(slurm_service, settings, tmp_path):
    svc, bundle = slurm_service
    camp, marker = hostile_campaign(tmp_path, acknowledged=True)
    bundle.write_json(RUN, "campaign.json", camp)
    await svc.bus.publish(corpus_completed())
    selected = await next_event(settings, "capacity.selected")
    snapshot = snapshot_of(bundle, selected)
    assert marker.exists()
    assert [c.name for c in snapshot.captures] == ["sinfo", "squeue", f"idle-check-{selected['node']}"]
    assert snapshot.verdicts[-1].idle_check is not None and snapshot.verdicts[-1].idle_check.exit_code == 0
    assert selected.get("idle_check_skipped") is None
