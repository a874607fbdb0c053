"""The capacity step without a broker: campaign from the bundle -> check -> snapshot -> event."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from contracts.campaign import Campaign
from contracts.events import CapacitySelected, CapacityUnavailable, CorpusCompleted
from services.capacity.app import run_step
from services.runtime.bundle.bundle import BundleStore
from services.runtime.errors import StepFailed
from services.shared.capacity import slurm
from services.shared.capacity.model import CapacitySnapshot
from services.shared.scheduler.errors import CommandMissing
from services.shared.scheduler.runner import RunResult

ROOT = Path(__file__).resolve().parents[3]
RUN = "toy-20261130-000000-c4p4c1"
SINFO, SQUEUE = tuple(slurm.sinfo_argv({})), tuple(slurm.squeue_argv({}))


def campaign(**capacity) -> Campaign:
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["capacity"] = capacity
    return Campaign.model_validate(data)


@pytest.fixture
def bundle(tmp_path) -> BundleStore:
    return BundleStore(tmp_path / "bundles", fsync=False)


def corpus_done() -> CorpusCompleted:
    return CorpusCompleted(run_id=RUN, producer="corpus/test", corpus=None, manifest=None, train_records=0,
                           heldout_records=0, skipped_reason="shapes-only")


def store(bundle: BundleStore, c: Campaign) -> None:
    bundle.write_json(RUN, "campaign.json", c)


def test_selected_node_with_snapshot_and_raw_outputs(bundle, recorded, fixture_text):
    store(bundle, campaign(scheduler="slurm", idle_check=["check", "{node}"]))
    runner = recorded({SINFO: fixture_text("sinfo.txt"), SQUEUE: fixture_text("squeue.txt")}, idle_check=lambda a: 0)
    event = corpus_done()
    out = run_step(bundle, runner, event, "capacity/test")
    assert isinstance(out, CapacitySelected) and out.node == "gpu08" and out.causation_id == event.event_id
    _, relpath = out.snapshot.uri.removeprefix("bundle://").split("/", 1)
    assert relpath.startswith("capacity/") and relpath.endswith("/snapshot.json")
    snapshot = CapacitySnapshot.model_validate(bundle.read_json(RUN, relpath))
    assert snapshot.node == "gpu08" and snapshot.idle_check == ["check", "{node}"]
    assert [c.name for c in snapshot.captures] == ["sinfo", "squeue", "idle-check-gpu08"]
    sinfo_raw = snapshot.captures[0].stdout.uri.removeprefix(f"bundle://{RUN}/")
    assert bundle.read_bytes(RUN, sinfo_raw).decode() == fixture_text("sinfo.txt")
    assert snapshot.captures[0].argv == list(SINFO)


def test_unavailable_carries_every_reason(bundle, recorded, fixture_text):
    store(bundle, campaign(scheduler="slurm", idle_check=["check", "{node}"]))
    runner = recorded({SINFO: fixture_text("sinfo.txt"), SQUEUE: fixture_text("squeue.txt")}, idle_check=lambda a: 1)
    out = run_step(bundle, runner, corpus_done(), "capacity/test")
    assert isinstance(out, CapacityUnavailable)
    assert "node gpu08: idle check ['check', 'gpu08'] exited 1 (0 means idle)" in out.reasons
    assert any("gpu01" in r and "experiment=other-run" in r for r in out.reasons)


def test_repeated_checks_never_rewrite_an_earlier_snapshot(bundle, recorded, fixture_text):
    store(bundle, campaign(scheduler="slurm", idle_check=["check", "{node}"]))
    outputs = {SINFO: fixture_text("sinfo.txt"), SQUEUE: fixture_text("squeue.txt")}
    first = run_step(bundle, recorded(outputs, idle_check=lambda a: 0), corpus_done(), "capacity/test")
    second = run_step(bundle, recorded(outputs, idle_check=lambda a: 1), corpus_done(), "capacity/test")
    assert first.snapshot.uri != second.snapshot.uri
    assert isinstance(first, CapacitySelected) and isinstance(second, CapacityUnavailable)


def test_missing_campaign_is_a_step_failure(bundle, recorded):
    with pytest.raises(StepFailed, match="no campaign.json"):
        run_step(bundle, recorded({}), corpus_done(), "capacity/test")


def test_missing_scheduler_command_is_a_step_failure(bundle):
    store(bundle, campaign(scheduler="slurm", idle_check=["check"]))

    def runner(argv, *, timeout_s):
        raise CommandMissing(f"{argv[0]!r} is not installed or not on PATH")

    with pytest.raises(StepFailed, match="'sinfo' is not installed") as failure:
        run_step(bundle, runner, corpus_done(), "capacity/test")
    assert failure.value.error_type == "CommandMissing"


def test_scheduler_error_is_a_step_failure(bundle, recorded):
    store(bundle, campaign(scheduler="slurm", idle_check=["check"]))
    down = RunResult(argv=SINFO, exit_code=1, stdout="", stderr="Unable to contact slurm controller", duration_s=0.1)
    with pytest.raises(StepFailed, match="Unable to contact slurm controller") as failure:
        run_step(bundle, recorded({SINFO: down}), corpus_done(), "capacity/test")
    assert failure.value.error_type == "SchedulerFailed"
