"""The pure decision: is a node idle? (docs/capacity.md#how-a-node-is-judged has the rules.)

A state, label or feature can rule a node *out*; only the absence of workloads plus the operator's
idle check rules it *in*. A label claiming idleness is never read here.
"""

from __future__ import annotations

from collections.abc import Iterable

from contracts.argv import ArgvTemplate
from services.shared.capacity.model import IdleCheckRun, NodeVerdict, NodeView, Workload


def describe(workload: Workload) -> str:
    """One workload in words, e.g. `slurm job 12 'other' RUNNING (experiment=other-run)`."""
    kind = {"slurm_job": "slurm job", "pod": "pod", "process": "process", "gpu_process": "GPU process"}[workload.kind]
    text = f"{kind} {workload.ref} {workload.name!r} {workload.state}"
    if workload.experiment:
        text += f" (experiment={workload.experiment})"
    if workload.detail:
        text += f" [{workload.detail}]"
    return text


def workload_reasons(view: NodeView) -> list[str]:
    """Why the workloads and blockers seen rule this node out; empty when none do."""
    reasons = [f"node {view.name}: {blocker}" for blocker in view.blockers]
    reasons += [f"node {view.name}: busy with {describe(w)}" for w in view.workloads]
    return reasons


def idle_check_reason(node: str, run: IdleCheckRun) -> str | None:
    """Why the operator's idle check rules the node out; None when it passed."""
    if run.timed_out:
        return f"node {node}: idle check {run.argv!r} ran past its {run.timeout_s:g} s timeout"
    if run.exit_code != 0:
        return f"node {node}: idle check {run.argv!r} exited {run.exit_code} (0 means idle)"
    return None


def judge(view: NodeView, check: IdleCheckRun | None, *, idle_check_skipped: str | None = None) -> NodeVerdict:
    """The verdict on one node from its workloads and, when they allow, the idle check.

    `check` is None when the workloads already ruled the node out (the idle
    check is not run then), or when the whole check skips it (`idle_check_skipped`
    says why); otherwise a node with no check is never idle.
    """
    reasons = workload_reasons(view)
    if not reasons:
        if check is not None:
            failed = idle_check_reason(view.name, check)
            if failed:
                reasons.append(failed)
        elif idle_check_skipped is None:
            reasons.append(f"node {view.name}: the idle check was not run")
    return NodeVerdict(node=view.name, idle=not reasons, reasons=reasons, idle_check=check)


def candidates(nodes: Iterable[NodeView], asked: str | None) -> list[NodeView]:
    """Nodes to consider, in a stable order: the asked node only, or every node by name."""
    if asked is not None:
        return [n for n in nodes if n.name == asked]
    return sorted(nodes, key=lambda n: n.name)


def render_idle_check(template: ArgvTemplate, node: str, run_id: str) -> list[str]:
    """The operator's idle-check argv for one node: {node} and {run_id} are filled in."""
    return template.render({"node": node, "run_id": run_id})
