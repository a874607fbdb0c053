"""Executing an approved training plan, once, with everything captured.

Stages: reuse an earlier capture, else re-attach to a launch never captured, else re-check the node,
record the argv, launch, watch and capture; then cleanup by label, probes, draft cost and the input
key. Each stage looks for its own record first, so a redelivery never runs the trainer twice
(docs/trainer-proxy.md#redelivery). A reuse plan launches nothing: it copies the earlier draft.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from contracts import layout
from contracts.campaign import Campaign
from contracts.catalogue import TRAINER as SERVICE
from contracts.envelope import ArtifactRef, Event
from contracts.events import TrainingCompleted, TrainingStarted
from contracts.progress import PROGRESS_UNITS, StepProgress
from services.runtime import failpoints
from services.runtime.bundle.bundle import ArtifactMissing, BundleStore
from services.runtime.delivery.progress import publish_progress
from services.runtime.delivery.route import StepContext
from services.runtime.errors import StepFailed
from services.shared.capacity.recheck import RecheckFailed, RecheckFn
from services.shared.scheduler.errors import SchedulerError
from services.shared.scheduler.slurm import cancel_labelled
from services.trainer_proxy.checks import draft_cost, probes
from services.trainer_proxy.errors import ExecutorError, TrainingStopped
from services.trainer_proxy.execution.capture import TrainingCapture, capture_run, read_capture, write_argv
from services.trainer_proxy.execution.detached import reattach
from services.trainer_proxy.execution.local import cleanup_local, run_local
from services.trainer_proxy.execution.monitor import RunOutcome
from services.trainer_proxy.execution.progress import ProgressRelay, Reporter, Update
from services.trainer_proxy.execution.slurm import reattach_slurm, run_slurm
from services.trainer_proxy.planning import reuse
from services.trainer_proxy.planning.inputs import prompt_messages
from services.trainer_proxy.planning.model import KubernetesLaunch, LocalLaunch, SlurmLaunch, TrainingPlan

STDERR_TAIL_BYTES = 600


@dataclass(frozen=True)
class Approved:
    """A plan cleared to run: its stored bytes hash to `ref.sha256`, which was approved."""

    plan: TrainingPlan
    ref: ArtifactRef
    campaign: Campaign


def stop_reason(plan: TrainingPlan, capture: TrainingCapture, stderr_tail: str) -> tuple[str, str] | None:
    """(error_type, reason) when the run is not trustworthy; None when it may be probed (pure)."""
    kept = f"{capture.output_files} output file(s) kept and hashed in {layout.TRAINING_OUTPUTS}"
    if capture.launch_error is not None:
        return "ExecutorFailed", f"the {plan.executor} executor failed to run the trainer: {capture.launch_error}"
    if capture.interrupted:
        return "TrainingInterrupted", (
            "an earlier delivery launched this plan and the service stopped before capturing it, and nothing "
            f"tells how the trainer ended (no recorded end, no live trainer); {kept}; approve a new run to train again"
        )
    if capture.timed_out:
        return "TrainingTimeout", (
            f"the trainer ran past commands.train.timeout_s ({plan.timeout_s:g} s) and was killed with its "
            f"process group; {kept}"
        )
    finding = next((summary.non_finite for summary in capture.losses if summary.non_finite), None)
    if finding is not None:
        stopped = "; the trainer was stopped at once" if capture.stopped_for_loss else ""
        return "NonFiniteLoss", (
            f"non-finite loss in the trainer's {finding.stream}, line {finding.line_number}: "
            f"{finding.key}={finding.value} ({finding.line!r}){stopped}; {kept}"
        )
    if capture.exit_code != 0:
        ended = f"exited {capture.exit_code}" if capture.exit_code is not None else (
            f"was killed by signal {capture.signal}" if capture.signal else "ended without an exit status"
        )
        tail = f"; stderr tail: {stderr_tail}" if stderr_tail else ""
        return "TrainerFailed", f"the trainer {ended}{tail}; {kept}"
    return None


def _tail(bundle: BundleStore, capture: TrainingCapture) -> str:
    path = bundle.resolve(capture.stderr.uri)
    try:
        data = path.read_bytes()[-STDERR_TAIL_BYTES:]
    except OSError:
        return ""
    return data.decode("utf-8", "replace").strip()


def _resolve(path: str, cwd: str) -> Path:
    candidate = Path(path)
    return candidate if candidate.is_absolute() else Path(cwd) / candidate


def _reporter(plan: TrainingPlan, trigger: Event, ctx: StepContext) -> Reporter | None:
    """The relay of the trainer's progress (step.progress, not journaled), when the approved plan declares its form."""
    if plan.progress is None:
        return None
    producer = f"{SERVICE}/{ctx.settings.instance}"

    async def publish(update: Update) -> None:
        await publish_progress(ctx.bus, trigger.caused(
            StepProgress, producer=producer, step="training", unit=PROGRESS_UNITS["training"], done=update.done,
            total=update.total, loss=update.loss, eta_s=update.eta_s, elapsed_s=update.elapsed_s), ctx.log)

    def warn(message: str) -> None:
        ctx.log.warning(message)

    return Reporter(ProgressRelay(plan.progress), publish, warn)


async def _launch(
    bundle: BundleStore, approved: Approved, trigger: Event, ctx: StepContext, *, recheck: RecheckFn
) -> RunOutcome:
    plan = approved.plan
    launch = plan.launch
    run_id = plan.run_id
    assert launch is not None, "a reuse plan launches nothing"
    if isinstance(launch, KubernetesLaunch):
        raise StepFailed(launch.note, error_type="PlanOnly")
    try:
        check = await asyncio.to_thread(recheck, bundle, approved.campaign, plan.node, run_id)
    except RecheckFailed as exc:
        raise StepFailed(
            f"the capacity check before launch could not run: {exc}; nothing was started",
            error_type="CapacityCheckFailed",
        ) from None
    if not check.idle:
        where = f" (snapshot: {check.snapshot.uri})" if check.snapshot else ""
        raise StepFailed(
            f"node {plan.node} is no longer idle, so nothing was started{where}: " + "; ".join(check.reasons),
            error_type="NodeBusy",
        )
    # From here on every attempt ends in a capture, whatever happens.
    write_argv(bundle, plan)
    # The trainer finds {output_dir} in place (on the shared bundle storage for Slurm).
    Path(plan.output_dir).mkdir(parents=True, exist_ok=True)
    producer = f"{SERVICE}/{ctx.settings.instance}"

    async def started(handle: str) -> None:
        await ctx.emit(trigger.caused(
            TrainingStarted, producer=producer, plan_sha256=approved.ref.sha256, executor=plan.executor, handle=handle,
        ))
        failpoints.hit("trainer.proxy-during-training")

    run_dir = bundle.run_dir(run_id).absolute()
    progress = _reporter(plan, trigger, ctx)
    try:
        if isinstance(launch, LocalLaunch):
            return await run_local(
                launch, run_id=run_id, run_dir=run_dir, timeout_s=plan.timeout_s, kill_grace_s=plan.kill_grace_s,
                on_started=started, progress=progress,
            )
        bundle.write_bytes(run_id, launch.job_script_path, launch.job_script.encode())
        return await run_slurm(
            launch, run_id=run_id, service=SERVICE, run_dir=run_dir, timeout_s=plan.timeout_s,
            kill_grace_s=plan.kill_grace_s, on_started=started, progress=progress,
        )
    except (ExecutorError, SchedulerError) as exc:
        launched = launch.sbatch_argv if not isinstance(launch, LocalLaunch) else launch.argv
        return RunOutcome(handle="none", launched_argv=list(launched), exit_code=None, signal=None,
                          duration_s=0.0, launch_error=str(exc))


async def _cleanup(bundle: BundleStore, plan: TrainingPlan) -> None:
    """After capture only; selection by the experiment label only. A cleanup
    that cannot run is recorded, not fatal: the outputs are already safe."""
    record: dict[str, object] = {"executor": plan.executor, "selector": f"experiment={plan.run_id}"}
    try:
        if isinstance(plan.launch, LocalLaunch):
            record["killed_process_groups"] = await asyncio.to_thread(cleanup_local, plan.run_id,
                                                                      grace_s=plan.kill_grace_s)
        else:
            record["cancelled_jobs"] = await cancel_labelled(plan.run_id)
    except (ExecutorError, SchedulerError) as exc:
        record["error"] = str(exc)
        structlog.get_logger().bind(service=SERVICE, run_id=plan.run_id).warning("cleanup failed", error=str(exc))
    bundle.write_json(plan.run_id, layout.TRAINING_CLEANUP, record)


def _interrupted(plan: TrainingPlan) -> RunOutcome:
    assert plan.launch is not None, "a reuse plan launches nothing"
    launched = getattr(plan.launch, "sbatch_argv", None) or plan.launch.argv
    return RunOutcome(handle="unknown", launched_argv=list(launched), exit_code=None, signal=None, duration_s=0.0,
                      interrupted=True)


async def _reattach(bundle: BundleStore, plan: TrainingPlan, progress: Reporter | None) -> RunOutcome | None:
    """The outcome of the trainer an earlier delivery launched, watched to its end if it still runs;
    None when nothing tells how it ended (services/trainer_proxy/execution/detached.py)."""
    launch = plan.launch
    run_dir = bundle.run_dir(plan.run_id).absolute()
    try:
        if isinstance(launch, LocalLaunch):
            return await reattach(launch, run_id=plan.run_id, run_dir=run_dir, timeout_s=plan.timeout_s,
                                  kill_grace_s=plan.kill_grace_s, progress=progress)
        if isinstance(launch, SlurmLaunch):
            return await reattach_slurm(launch, run_dir=run_dir, timeout_s=plan.timeout_s,
                                        kill_grace_s=plan.kill_grace_s, progress=progress)
    except SchedulerError as exc:
        return RunOutcome(handle="unknown", launched_argv=list(getattr(launch, "sbatch_argv", [])), exit_code=None,
                          signal=None, duration_s=0.0,
                          launch_error=f"re-attaching to the earlier delivery's job: {exc}")
    return None


def _launched_before(bundle: BundleStore, run_id: str) -> bool:
    try:
        bundle.ref(run_id, layout.TRAINING_ARGV)
    except ArtifactMissing:
        return False
    return True


def handed_on(plan: TrainingPlan) -> dict[str, Any]:
    """What training.completed carries for the bench: the placement and the corpus the plan used."""
    return {"scheduler": plan.executor, "node": plan.node, "corpus": plan.inputs.corpus}


async def execute(
    bundle: BundleStore, approved: Approved, trigger: Event, ctx: StepContext, *, recheck: RecheckFn
) -> TrainingCompleted:
    """Run the approved plan to a trustworthy draft, or raise TrainingStopped / StepFailed."""
    plan = approved.plan
    run_id = plan.run_id
    if plan.reuse is not None:
        return await _reuse(bundle, approved, trigger, ctx)
    prior = read_capture(bundle, run_id)
    if prior is None:
        if _launched_before(bundle, run_id):
            outcome = await _reattach(bundle, plan, _reporter(plan, trigger, ctx)) or _interrupted(plan)
            ctx.log.info("re-attached to an earlier delivery's trainer" if not outcome.interrupted
                         else "an earlier delivery's trainer left no outcome: interrupted", handle=outcome.handle)
        else:
            outcome = await _launch(bundle, approved, trigger, ctx, recheck=recheck)
        capture, capture_ref, _ = await asyncio.to_thread(capture_run, bundle, plan, approved.ref.sha256, outcome)
        await _cleanup(bundle, plan)
    else:
        capture, capture_ref = prior
    evidence = [capture_ref, capture.stdout, capture.stderr, capture.outputs]
    stopped = stop_reason(plan, capture, _tail(bundle, capture))
    if stopped is not None:
        raise TrainingStopped(stopped[1], error_type=stopped[0], artifacts=evidence)
    report, report_ref = await _probe(bundle, plan)
    if not report.passed:
        failed = "; ".join(f"{check.name}: {check.detail}" for check in report.failures)
        raise TrainingStopped(f"a capture-correctness probe failed: {failed}", error_type="ProbeFailed",
                              artifacts=[*evidence, report_ref])
    await _draft_cost(bundle, plan, Path(plan.checkpoint_dir), ctx)
    reuse.record_key(bundle, plan, capture.outputs, reused_from=None)
    return trigger.caused(
        TrainingCompleted,
        producer=f"{SERVICE}/{ctx.settings.instance}",
        output=capture.outputs,
        checkpoint_dir=plan.checkpoint_dir,
        duration_s=capture.duration_s,
        **handed_on(plan),
    )


async def _reuse(bundle: BundleStore, approved: Approved, trigger: Event, ctx: StepContext) -> TrainingCompleted:
    """Copy the earlier run's draft the plan names; an earlier delivery's record is re-emitted as is."""
    plan = approved.plan
    record = reuse.read_reuse(bundle, plan.run_id)
    if record is None:
        record = await asyncio.to_thread(reuse.copy_draft, bundle, plan, approved.ref.sha256)
        bundle.write_json(plan.run_id, layout.TRAINING_REUSE, record)
    # Timed again rather than copied from the source run: the cost is of this machine, now.
    await _draft_cost(bundle, plan, Path(record.checkpoint_dir), ctx)
    reuse.record_key(bundle, plan, record.output, reused_from=record.reused_from)
    ctx.log.info("draft reused", reused_from=record.reused_from, files=record.files, duration_s=record.duration_s)
    return trigger.caused(
        TrainingCompleted,
        producer=f"{SERVICE}/{ctx.settings.instance}",
        output=record.output,
        checkpoint_dir=record.checkpoint_dir,
        duration_s=record.duration_s,
        reused_from=record.reused_from,
        **handed_on(plan),
    )


def _cwd(plan: TrainingPlan) -> str:
    # A reuse plan launches nothing: its relative paths are the service's, as at plan time.
    return plan.launch.cwd if isinstance(plan.launch, (LocalLaunch, SlurmLaunch)) else "."


async def _draft_cost(bundle: BundleStore, plan: TrainingPlan, draft_dir: Path, ctx: StepContext) -> None:
    """`training/draft-cost.json`, evidence only: a measurement that cannot run is logged, never a failure."""
    cwd = _cwd(plan)
    await draft_cost.record(
        bundle, plan.run_id, draft_dir, target=_resolve(plan.target, cwd), tokenizer=_resolve(plan.tokenizer, cwd),
        log=ctx.log,
    )


async def _probe(bundle: BundleStore, plan: TrainingPlan) -> tuple[probes.ProbeReport, ArtifactRef]:
    run_id = plan.run_id
    assert plan.probes is not None, "a reuse plan runs no probes"
    try:
        ref = bundle.ref(run_id, layout.TRAINING_PROBES)
    except ArtifactMissing:
        pass
    else:
        return probes.ProbeReport.model_validate_json(bundle.read_bytes(run_id, layout.TRAINING_PROBES)), ref
    cwd = _cwd(plan)
    heldout = bundle.read_bytes(run_id, layout.TRAINING_CORPUS_HELDOUT)
    checks = await probes.run_builtin(
        Path(plan.checkpoint_dir),
        target=_resolve(plan.target, cwd),
        tokenizer=_resolve(plan.tokenizer, cwd),
        prompts=prompt_messages(heldout, plan.probes.prompts),
        timeout_s=plan.probes.timeout_s,
    )
    operator = None
    if plan.probes.operator_argv is not None:
        check, operator = await probes.run_operator(
            bundle, run_id, plan.probes.operator_argv, cwd=cwd, timeout_s=plan.probes.timeout_s,
            kill_grace_s=plan.kill_grace_s, declared_env=list(getattr(plan.launch, "env", None) or []),
        )
        checks.append(check)
    report = probes.report(run_id, Path(plan.checkpoint_dir), checks, operator)
    return report, bundle.write_bytes(run_id, layout.TRAINING_PROBES, report.model_dump_json(indent=2).encode() + b"\n")
