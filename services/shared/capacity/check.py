"""The read-only idle-node check: the capacity step's, and the one repeated before a launch (`recheck`).

It reads the scheduler, decides from the workloads seen (`idle`), then runs the operator's idle check
on the surviving candidates in name order until one passes. `skip_idle_check` (a run without the typed
acknowledgement) is recorded in the verdict; the pre-launch re-check never skips (docs/capacity.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from contracts import selectors
from contracts.argv import ArgvError
from contracts.campaign import CapacitySpec
from services.runtime.processes import workload_env
from services.shared.capacity import kubernetes, local, slurm
from services.shared.capacity.errors import CapacityConfigError
from services.shared.capacity.idle import candidates, judge, render_idle_check
from services.shared.capacity.model import IdleCheckRun, NodeVerdict, Verdict
from services.shared.capacity.observe import Observation, capture_name, to_capture
from services.shared.scheduler.errors import CommandMissing
from services.shared.scheduler.runner import CommandRunner
from services.shared.secret_args import mask_argv

# The operator's idle check gets this long per node; past it the node is not idle.
IDLE_CHECK_TIMEOUT_S = 60.0

Observe = Callable[[Mapping[str, str], CommandRunner], Observation]
ADAPTERS: dict[str, Observe] = {
    "local": local.observe,
    "slurm": slurm.observe,
    "kubernetes": kubernetes.observe,
}


def validate(spec: CapacitySpec) -> None:
    """CapacityConfigError unless the spec can be used: selectors that contracts/selectors.py
    knows for this scheduler, each value in its form, and an idle check. Keys the check
    itself does not read (a job's image, a Pod's memory) pass: their consumers read them."""
    found = selectors.problems(spec.scheduler, spec.selectors)
    if found:
        raise CapacityConfigError("; ".join(found))
    if spec.idle_check is None:
        raise CapacityConfigError(
            "capacity.idle_check is not set: give the operator's idle-node check argv (exit status 0 means idle)"
        )


def _run_idle_check(spec: CapacitySpec, node: str, run_id: str, runner: CommandRunner, *,
                    observation: Observation) -> IdleCheckRun:
    if spec.idle_check is None:  # validate() refuses this; kept for callers that skip it
        raise CapacityConfigError("capacity.idle_check is not set")
    try:
        argv = render_idle_check(spec.idle_check, node, run_id)
    except ArgvError as exc:
        raise CapacityConfigError(f"capacity.idle_check cannot be rendered: {exc}") from exc
    # The operator's command: a workload's environment, with the names capacity.idle_check_env declares.
    env = workload_env.environment(spec.idle_check_env, where="capacity.idle_check_env")
    try:
        result = runner(argv, timeout_s=IDLE_CHECK_TIMEOUT_S, env=env)
    except CommandMissing as exc:
        raise CommandMissing(f"capacity.idle_check: {exc}") from exc
    # Recorded (snapshot, captures, reasons) with a secret-bearing flag's value masked.
    result = dataclasses.replace(result, argv=tuple(mask_argv(result.argv)))
    observation.captures.append(to_capture(f"idle-check-{capture_name(node)}", result))
    return IdleCheckRun(
        argv=list(result.argv),
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        duration_s=result.duration_s,
        timeout_s=IDLE_CHECK_TIMEOUT_S,
    )


def check_node(
    spec: CapacitySpec, node: str | None, *, run_id: str, runner: CommandRunner, skip_idle_check: str | None = None
) -> Verdict:
    """Is `node` idle now (or, with node None, which node is)? Raises CapacityError (or the
    runner's CommandMissing) only when the scheduler cannot be read or the spec cannot be
    used; a busy node is a verdict. With `skip_idle_check` (why it is not run) the
    operator's idle check runs on no node: the verdict rests on the scheduler's
    read-only view and carries the reason."""
    validate(spec)
    observe = ADAPTERS[spec.scheduler]
    observation = observe(spec.selectors, runner)
    verdicts: list[NodeVerdict] = []
    selected: str | None = None
    for view in candidates(observation.nodes, node):
        # The idle check runs only where the workloads leave the node a candidate.
        survives = not view.blockers and not view.workloads
        run_check = survives and skip_idle_check is None
        check = _run_idle_check(spec, view.name, run_id, runner, observation=observation) if run_check else None
        verdict = judge(view, check, idle_check_skipped=skip_idle_check)
        verdicts.append(verdict)
        if verdict.idle:
            selected = view.name
            break
    reasons = [reason for verdict in verdicts for reason in verdict.reasons]
    if selected is None and not verdicts:
        named = f" named {node!r}" if node else ""
        listed = ", ".join(sorted(v.name for v in observation.nodes)) or "none"
        reasons = [
            f"{spec.scheduler} lists no node{named} matching selectors {dict(spec.selectors)} (nodes listed: {listed})"
        ]
    return Verdict(
        run_id=run_id,
        scheduler=spec.scheduler,
        selectors=dict(spec.selectors),
        asked_node=node,
        node=selected,
        idle=selected is not None,
        reasons=[] if selected else reasons,
        nodes=observation.nodes,
        verdicts=verdicts,
        idle_check_skipped=skip_idle_check,
        captures=observation.captures,
        checked_at=datetime.now(UTC),
    )
