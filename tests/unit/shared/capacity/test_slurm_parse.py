"""The Slurm adapter against recorded `sinfo`/`squeue` outputs (fixtures/sinfo.txt,
fixtures/squeue.txt); the real single-node Slurm is exercised in
tests/integration/test_capacity_slurm.py."""

from __future__ import annotations

import pytest

from contracts.campaign import CapacitySpec
from services.shared.capacity import slurm
from services.shared.capacity.check import check_node
from services.shared.capacity.errors import CapacityConfigError, SchedulerFailed, SchedulerOutputInvalid
from services.shared.scheduler.runner import RunResult

SINFO = tuple(slurm.sinfo_argv({}))
SQUEUE = tuple(slurm.squeue_argv({}))


@pytest.mark.parametrize(
    ("hostlist", "names"),
    [
        ("vm", ["vm"]),
        ("gpu[01-03,7]", ["gpu01", "gpu02", "gpu03", "gpu7"]),  # width per range, as Slurm does
        ("a1,b[9-11]", ["a1", "b9", "b10", "b11"]),
        ("r[1-2]-n[1-2]", ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]),
        ("gpu[008-010]", ["gpu008", "gpu009", "gpu010"]),
    ],
)
def test_expand_hostlist(hostlist, names):
    assert slurm.expand_hostlist(hostlist) == names


@pytest.mark.parametrize("bad", ["gpu[01-03", "gpu]1[", "gpu[a-b]"])
def test_malformed_hostlist_is_an_output_error(bad):
    with pytest.raises(SchedulerOutputInvalid):
        slurm.expand_hostlist(bad)


def test_parse_sinfo_merges_partitions_and_reads_resources(fixture_text):
    nodes = {n.name: n for n in slurm.parse_sinfo(fixture_text("sinfo.txt"))}
    assert sorted(nodes) == [f"gpu0{i}" for i in range(1, 9)]
    assert nodes["gpu01"].partitions == ["gpu", "debug"]
    assert nodes["gpu01"].labels == {"feature.h100": "true", "feature.specdec-idle": "true"}
    assert (nodes["gpu01"].cpus, nodes["gpu01"].memory_mb, nodes["gpu01"].gpus) == (64, 515000, 8)
    assert nodes["gpu08"].gpus == 10
    # A reason containing '|' stays whole; the state rules the node out.
    assert nodes["gpu04"].blockers == ["scheduler state 'drained': not usable (down, drained, reserved or unknown) "
                                       "(reason: bad nvlink | replaced tomorrow)"]
    assert "not responding" in nodes["gpu05"].blockers[0]
    assert nodes["gpu01"].blockers == [] and nodes["gpu02"].blockers == []


def test_parse_squeue_keeps_jobs_that_hold_nodes(fixture_text):
    jobs = {job.ref: (names, job) for names, job in slurm.parse_squeue(fixture_text("squeue.txt"))}
    assert sorted(jobs) == ["4101", "4102", "4104"], "pending and completed jobs hold no node"
    names, other = jobs["4101"]
    assert names == ["gpu01", "gpu03"] and other.experiment == "other-run" and other.state == "RUNNING"
    assert jobs["4104"][1].experiment is None, "a comment without experiment= carries no label"


def test_short_lines_are_output_errors():
    with pytest.raises(SchedulerOutputInvalid, match="sinfo line 1"):
        slurm.parse_sinfo("gpu01|idle|64\n")
    with pytest.raises(SchedulerOutputInvalid, match="squeue line 2"):
        slurm.parse_squeue("1|a|u|RUNNING|p|n1|c\n2|b\n")


def spec(**selectors: str) -> CapacitySpec:
    return CapacitySpec(scheduler="slurm", selectors=selectors, idle_check=["idle-check", "{node}", "{run_id}"])


def test_busy_nodes_are_never_selected_whatever_state_and_features_say(recorded, fixture_text):
    runner = recorded({SINFO: fixture_text("sinfo.txt"), SQUEUE: fixture_text("squeue.txt")}, idle_check=lambda argv: 0)
    verdict = check_node(spec(), None, run_id="run-1", runner=runner)
    assert verdict.idle and verdict.node == "gpu08", verdict.model_dump()
    by_node = {v.node: v for v in verdict.verdicts}
    # gpu01 says `idle` and carries a specdec-idle feature, but job 4101 runs there.
    assert not by_node["gpu01"].idle and "experiment=other-run" in by_node["gpu01"].reasons[0]
    assert not by_node["gpu06"].idle and "says busy but no job" in by_node["gpu06"].reasons[0]
    assert not by_node["gpu07"].idle and "SUSPENDED" in by_node["gpu07"].reasons[0]
    # The idle check ran only on the one node the workloads left a candidate.
    assert [c for c in runner.calls if c[0] == "idle-check"] == [["idle-check", "gpu08", "run-1"]]


def test_asking_for_a_busy_node_answers_not_idle(recorded, fixture_text):
    runner = recorded({SINFO: fixture_text("sinfo.txt"), SQUEUE: fixture_text("squeue.txt")}, idle_check=lambda argv: 0)
    verdict = check_node(spec(), "gpu03", run_id="run-1", runner=runner)
    assert not verdict.idle and verdict.node is None and verdict.asked_node == "gpu03"
    assert verdict.reasons == ["node gpu03: busy with slurm job 4101 'other' RUNNING (experiment=other-run) "
                               "[user alice, partition gpu]"]


def test_selectors_reach_the_commands(recorded, fixture_text):
    sinfo = tuple(slurm.sinfo_argv({"partition": "debug", "nodelist": "gpu01"}))
    squeue = tuple(slurm.squeue_argv({"partition": "debug", "nodelist": "gpu01"}))
    assert "--partition=debug" in sinfo and "--nodes=gpu01" in sinfo and "--nodelist=gpu01" in squeue
    runner = recorded({sinfo: fixture_text("sinfo.txt").splitlines()[1] + "\n", squeue: fixture_text("squeue.txt")})
    verdict = check_node(spec(partition="debug", nodelist="gpu01"), None, run_id="run-1", runner=runner)
    assert not verdict.idle and [n.name for n in verdict.nodes] == ["gpu01"]


def test_no_node_listed_is_unavailable_with_the_reason(recorded):
    runner = recorded({tuple(slurm.sinfo_argv({"partition": "none"})): "", SQUEUE: ""})
    verdict = check_node(spec(partition="none"), None, run_id="run-1", runner=runner)
    assert not verdict.idle and "lists no node matching selectors {'partition': 'none'}" in verdict.reasons[0]


def test_unknown_selector_is_a_config_error(recorded):
    with pytest.raises(CapacityConfigError, match="label_selector"):
        check_node(spec(label_selector="a=b"), None, run_id="run-1", runner=recorded({}))


def test_scheduler_that_does_not_answer_fails_with_its_stderr(recorded):
    down = RunResult(
        argv=SINFO,
        exit_code=1,
        stdout="",
        stderr="slurm_load_partitions: Unable to contact slurm controller",
        duration_s=0.2,
    )
    with pytest.raises(SchedulerFailed, match="Unable to contact slurm controller"):
        check_node(spec(), None, run_id="run-1", runner=recorded({SINFO: down}))


@pytest.mark.parametrize(
    ("configured", "items"),
    [
        ("gpu:h100:8(S:0-1)", [("gpu", "h100", 8)]),
        ("gpu:h100:8(S:0-1),gpu:a100:2", [("gpu", "h100", 8), ("gpu", "a100", 2)]),
        ("gpu:4(S:0,1),specdec:4", [("gpu", None, 4), ("specdec", None, 4)]),  # a comma inside () does not split
        (None, []),
    ],
)
def test_a_nodes_configured_gres(configured, items):
    assert [(g.name, g.type, g.count) for g in slurm.node_gres(configured)] == items


@pytest.mark.parametrize(
    ("gres", "selected"),
    [
        ("gpu:1", "gpu08"),  # any type counts: 10 GPUs
        ("gpu:10", "gpu08"),
        ("gpu:11", None),
        ("gpu:a100:2", "gpu08"),
        ("gpu:a100:3", None),
        ("gpu:h100:8,gpu:a100:1", "gpu08"),
        ("nvme:1", None),
    ],
)
def test_gres_rules_out_nodes_that_lack_it(recorded, fixture_text, gres, selected):
    runner = recorded({SINFO: fixture_text("sinfo.txt"), SQUEUE: fixture_text("squeue.txt")}, idle_check=lambda argv: 0)
    verdict = check_node(spec(gres=gres), None, run_id="run-1", runner=runner)
    assert verdict.node == selected
    if selected is None:
        reason = next(r for r in verdict.reasons if r.startswith("node gpu08:"))
        assert "lacks generic resource" in reason and "capacity.selectors.gres" in reason, reason
        assert [c for c in runner.calls if c[0] == "idle-check"] == [], "no idle check on a node that lacks the GRES"
