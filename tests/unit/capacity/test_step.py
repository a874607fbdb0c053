"""The capacity step without a broker: campaign from the bundle -> check -> snapshot -> event."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from contracts import layout
from contracts.campaign import Campaign
from contracts.events import CapacitySelected, CapacityUnavailable, CorpusCompleted
from services.capacity.app import NOT_ACKNOWLEDGED, run_step
from services.runtime.bundle.bundle import BundleStore
from services.runtime.errors import StepFailed
from services.shared.capacity import slurm
from services.shared.capacity.model import CapacitySnapshot
from services.shared.capacity.recheck import recheck
from services.shared.scheduler.errors import CommandMissing
from services.shared.scheduler.runner import RunResult

ROOT = Path(__file__).resolve().parents[3]
RUN = "toy-20261130-000000-c4p4c1"
SINFO, SQUEUE = tuple(slurm.sinfo_argv({})), tuple(slurm.squeue_argv({}))


def campaign(acknowledged: bool = True, **capacity) -> Campaign:
    """A campaign with this capacity section; acknowledged unless told (the idle check runs only then)."""
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["capacity"] = capacity
    data["acknowledgements"]["i_understand_this_mutates_cluster"] = acknowledged
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


def snapshot_of(bundle: BundleStore, ref) -> CapacitySnapshot:
    return CapacitySnapshot.model_validate(bundle.read_json(RUN, ref.uri.removeprefix(f"bundle://{RUN}/")))


def test_unacknowledged_run_selects_from_the_read_only_view_and_runs_no_idle_check(bundle, recorded, fixture_text):
    store(bundle, campaign(acknowledged=False, scheduler="slurm", idle_check=["check", "{node}"]))
    # An idle check that would refuse every node: were it run, nothing would be selected.
    runner = recorded({SINFO: fixture_text("sinfo.txt"), SQUEUE: fixture_text("squeue.txt")}, idle_check=lambda a: 1)
    out = run_step(bundle, runner, corpus_done(), "capacity/test")
    assert runner.calls == [list(SINFO), list(SQUEUE)]
    # gpu08 is the only node the workloads and states leave; the others stay ruled out with their reasons.
    assert isinstance(out, CapacitySelected) and out.node == "gpu08" and out.idle_check_skipped == NOT_ACKNOWLEDGED
    snapshot = snapshot_of(bundle, out.snapshot)
    assert snapshot.idle_check_skipped == NOT_ACKNOWLEDGED and snapshot.idle_check == ["check", "{node}"]
    assert [c.name for c in snapshot.captures] == ["sinfo", "squeue"]
    assert [(v.node, v.idle, v.idle_check) for v in snapshot.verdicts][-1] == ("gpu08", True, None)
    assert all(not v.idle and v.reasons for v in snapshot.verdicts[:-1])


def test_unacknowledged_run_with_every_node_busy_is_unavailable_with_the_reasons(bundle, recorded, fixture_text):
    store(bundle, campaign(acknowledged=False, scheduler="slurm", idle_check=["check", "{node}"]))
    busy = fixture_text("squeue.txt") + "4106|mine|frank|RUNNING|gpu|gpu08|experiment=mine\n"
    runner = recorded({SINFO: fixture_text("sinfo.txt"), SQUEUE: busy}, idle_check=lambda a: 0)
    out = run_step(bundle, runner, corpus_done(), "capacity/test")
    assert isinstance(out, CapacityUnavailable) and runner.calls == [list(SINFO), list(SQUEUE)]
    assert any(r.startswith("node gpu08: busy with slurm job 4106") for r in out.reasons)
    assert snapshot_of(bundle, out.snapshot).idle_check_skipped == NOT_ACKNOWLEDGED


def test_acknowledged_run_tries_the_idle_check_node_by_node(bundle, recorded, fixture_text):
    store(bundle, campaign(scheduler="slurm", idle_check=["check", "{node}"]))
    runner = recorded({SINFO: fixture_text("sinfo.txt"), SQUEUE: fixture_text("squeue.txt")}, idle_check=lambda a: 0)
    out = run_step(bundle, runner, corpus_done(), "capacity/test")
    assert runner.calls == [list(SINFO), list(SQUEUE), ["check", "gpu08"]]
    assert isinstance(out, CapacitySelected) and out.idle_check_skipped is None
    assert snapshot_of(bundle, out.snapshot).idle_check_skipped is None


def test_the_pre_launch_recheck_runs_the_idle_check_whatever_the_campaign_says(bundle, recorded, fixture_text):
    """The re-check is reached only by an approved plan (the approval carries the acknowledgement), so it runs
    the idle check even for a campaign without the typed field: a node it refuses stops the launch."""
    unacknowledged = campaign(acknowledged=False, scheduler="slurm", idle_check=["check", "{node}"])
    runner = recorded({SINFO: fixture_text("sinfo.txt"), SQUEUE: fixture_text("squeue.txt")}, idle_check=lambda a: 1)
    check = recheck(bundle, unacknowledged, "gpu08", RUN, folder=layout.TRAINING_RECHECK_DIR, runner=runner)
    assert runner.calls[-1] == ["check", "gpu08"]
    assert not check.idle and check.reasons == ["node gpu08: idle check ['check', 'gpu08'] exited 1 (0 means idle)"]
