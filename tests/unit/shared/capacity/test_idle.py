"""The pure idle decision: workloads and blockers rule a node out; only their
absence plus a passing idle check rules it in."""

from __future__ import annotations

import pytest

from contracts.argv import ArgvError, ArgvTemplate
from services.shared.capacity.idle import candidates, describe, judge, render_idle_check
from services.shared.capacity.model import IdleCheckRun, NodeView, Workload

PASS = IdleCheckRun(argv=["check"], exit_code=0, timed_out=False, duration_s=0.1, timeout_s=60)


def job(experiment: str | None = "other-run") -> Workload:
    return Workload(kind="slurm_job", ref="42", name="other", state="RUNNING", experiment=experiment)


def test_no_workload_no_blocker_and_passing_check_is_idle():
    verdict = judge(NodeView(name="n1", state="idle"), PASS)
    assert verdict.idle and verdict.reasons == [] and verdict.idle_check == PASS


def test_a_workload_makes_the_node_busy_whatever_labels_and_state_claim():
    view = NodeView(
        name="n1", state="idle", labels={"specdec.io/idle": "true", "feature.idle": "true"}, workloads=[job()]
    )
    verdict = judge(view, PASS)
    assert not verdict.idle
    assert verdict.reasons == ["node n1: busy with slurm job 42 'other' RUNNING (experiment=other-run)"]


def test_a_blocker_rules_the_node_out():
    verdict = judge(NodeView(name="n1", state="down*", blockers=["not responding"]), PASS)
    assert not verdict.idle and verdict.reasons == ["node n1: not responding"]


@pytest.mark.parametrize(
    ("exit_code", "timed_out", "expected"),
    [(1, False, "exited 1 (0 means idle)"), (None, True, "ran past its 60 s timeout"), (3, False, "exited 3")],
)
def test_failing_or_hung_idle_check_rules_the_node_out(exit_code, timed_out, expected):
    check = IdleCheckRun(argv=["check", "n1"], exit_code=exit_code, timed_out=timed_out, duration_s=1, timeout_s=60)
    verdict = judge(NodeView(name="n1", state="idle"), check)
    assert not verdict.idle
    assert expected in verdict.reasons[0] and "['check', 'n1']" in verdict.reasons[0]


def test_a_node_without_an_idle_check_is_never_idle():
    verdict = judge(NodeView(name="n1", state="idle"), None)
    assert not verdict.idle and "not run" in verdict.reasons[0]


def test_a_check_that_skips_the_idle_check_selects_from_workloads_and_blockers_alone():
    skipped = "the run is not acknowledged"
    assert judge(NodeView(name="n1", state="idle"), None, idle_check_skipped=skipped).idle
    assert not judge(NodeView(name="n1", state="idle", workloads=[job()]), None, idle_check_skipped=skipped).idle
    assert not judge(NodeView(name="n1", state="down*", blockers=["down"]), None, idle_check_skipped=skipped).idle


def test_describe_names_kind_ref_and_label():
    pod = Workload(kind="pod", ref="ml/p-0", name="p-0", state="Running", experiment=None, detail="owner Job/p")
    assert describe(pod) == "pod ml/p-0 'p-0' Running [owner Job/p]"


def test_candidates_are_sorted_or_the_asked_node_only():
    nodes = [NodeView(name=n, state=None) for n in ("b", "a", "c")]
    assert [n.name for n in candidates(nodes, None)] == ["a", "b", "c"]
    assert [n.name for n in candidates(nodes, "c")] == ["c"]
    assert candidates(nodes, "zz") == []


def test_idle_check_renders_node_and_run_id_verbatim():
    template = ArgvTemplate(["/opt/check", "--node={node}", "{run_id}", "a;b {{literal}}"])
    assert render_idle_check(template, "gpu01", "run-1") == ["/opt/check", "--node=gpu01", "run-1", "a;b {literal}"]


def test_idle_check_with_a_placeholder_of_another_step_cannot_render():
    with pytest.raises(ArgvError, match="corpus"):
        render_idle_check(ArgvTemplate(["check", "{corpus}"]), "n1", "run-1")
