"""Bench-runner entrypoint: training.completed / bench.requested -> bench.planned
-> [approval] -> bench.trial.completed ... -> bench.completed.

The plan (bench/plan.json, with the prompts it measures in bench/prompts.jsonl)
is stored before anything runs; it runs at once only when the campaign
pre-approves it, otherwise on a run.approved naming its sha256
(services/runtime/approval.py). Executing reads the plan back from the bundle,
hash-checked: a plan changed after approval never runs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from contracts.campaign import Campaign, Matrix, TrafficFile
from contracts.catalogue import BENCH, PLAN_PATHS
from contracts.envelope import ArtifactRef, Event
from contracts.events import (
    BenchCompleted,
    BenchPlanned,
    BenchTrialCompleted,
    CapacitySelected,
    RunApproved,
    TrainingCompleted,
)
from services.bench.executor import LocalExecutor, ServingExecutor
from services.bench.kubernetes import KubernetesExecutor, require_kubectl
from services.bench.plan import BenchPlan, build_plan
from services.bench.prompts import Prompt, cycle, heldout_prompts, shaped_prompts
from services.bench.run import Runner, read_prompts
from services.bench.slurm import SlurmExecutor
from services.runtime.approval import announced, approval_step_key, covers, pre_approved, stored_plan
from services.runtime.bundle import ArtifactMissing, BundleError, BundleStore, InvalidPath
from services.runtime.consumer import Route, StepContext
from services.runtime.errors import SpecdecError, StepFailed
from services.runtime.target import tokenizer_folder

NAME = BENCH
STEP = "bench"
PLAN_PATH = PLAN_PATHS["bench"]
PROMPTS_PATH = "bench/prompts.jsonl"


def load_matrix(campaign: Campaign) -> Matrix:
    if isinstance(campaign.matrix, Matrix):
        return campaign.matrix
    path = Path(campaign.matrix.path)
    try:
        return Matrix.model_validate(yaml.safe_load(path.read_text()))
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise StepFailed(f"cannot use matrix.path {path}: {exc}", error_type="MatrixUnusable") from None


def training_output(bundle: BundleStore, event: Event) -> str | None:
    """The trained draft's directory: from training.completed, a request's input, or the run's journal."""
    if isinstance(event, TrainingCompleted):
        return event.checkpoint_dir
    ref = getattr(event, "inputs", {}).get("training.output")
    if ref is not None:
        path = bundle.resolve(ref.uri)
        return str(path if path.is_dir() else path.parent)
    for past in reversed(bundle.events(event.run_id)):
        if past.get("schema") == TrainingCompleted.SCHEMA and past.get("checkpoint_dir"):
            return str(past["checkpoint_dir"])
    return None


def build_prompts(bundle: BundleStore, campaign: Campaign, matrix: Matrix, run_id: str) -> list[Prompt]:
    load = matrix.load
    tokenizer = tokenizer_folder(campaign)
    if isinstance(campaign.traffic, TrafficFile):
        try:
            heldout = bundle.resolve(bundle.ref(run_id, "corpus/CORPUS.jsonl").uri)
        except (ArtifactMissing, InvalidPath):
            raise StepFailed("no corpus in the bundle: the bench measures the corpus's heldout split; "
                             "run the corpus step first", error_type="NoCorpus") from None
        prompts = heldout_prompts(heldout, limit=load.num_prompts, tokenizer_dir=tokenizer,
                                  max_output_tokens=load.max_output_tokens, ignore_eos=load.ignore_eos)
    else:
        from services.bench.prompts import ShapeSpec
        from services.profiler.shapes import resolve

        shape = resolve(campaign.traffic.shapes[:1])[0]
        spec = ShapeSpec(name=shape.name, input_tokens=min(shape.input_tokens, campaign.target.max_model_len // 2),
                         output_tokens=load.max_output_tokens or shape.output_tokens)
        prompts = shaped_prompts(spec, load.num_prompts, tokenizer_dir=tokenizer)
    return cycle(prompts, load.num_prompts)


def default_node(bundle: BundleStore, campaign: Campaign, matrix: Matrix, run_id: str) -> str:
    """Where cells without a node are served: this host for the local executor; on a
    scheduler, the capacity step's latest selection in the run's journal. This host is
    no scheduler node, so without a selection every cell must name its node."""
    import socket

    if campaign.capacity.scheduler == "local":
        return socket.gethostname()
    for past in reversed(bundle.events(run_id)):
        if past.get("schema") == CapacitySelected.SCHEMA and past.get("node"):
            return str(past["node"])
    unplaced = [cell.cell_id for cell in matrix.cells if not cell.node]
    if unplaced:
        raise StepFailed(
            f"run {run_id} has no capacity.selected in its journal, so no idle {campaign.capacity.scheduler} node is "
            f"known for cells {unplaced}: run the capacity step first (specdec request capacity {run_id}) or give "
            "each cell its node", error_type="NoCapacity")
    return ""  # every cell names its node


def make_executor(plan: BenchPlan, bundle: BundleStore) -> ServingExecutor:
    if plan.executor == "slurm":
        return SlurmExecutor(plan.run_id, bundle)
    if plan.executor == "kubernetes":
        require_kubectl()
        first = plan.launches[0].kubernetes if plan.launches else None
        return KubernetesExecutor(plan.run_id, bundle, first.cleanup_argv if first else [])
    return LocalExecutor(plan.run_id, bundle)


def plan_bench(bundle: BundleStore, campaign: Campaign, event: Event) -> tuple[BenchPlan, ArtifactRef]:
    run_id = event.run_id
    matrix = load_matrix(campaign)
    try:
        prompts = build_prompts(bundle, campaign, matrix, run_id)
        prompts_ref = bundle.write_bytes(run_id, PROMPTS_PATH, b"".join(p.model_dump_json().encode() + b"\n" for p in prompts))
        plan = build_plan(
            campaign, matrix, run_id=run_id, default_node=default_node(bundle, campaign, matrix, run_id),
            training_output=training_output(bundle, event),
            prompts={"source": PROMPTS_PATH, "uri": prompts_ref.uri, "sha256": prompts_ref.sha256, "count": len(prompts)},
            run_dir=str(bundle.run_dir(run_id).absolute()), cwd=str(Path.cwd()),
        )
    except StepFailed:
        raise
    except SpecdecError as exc:
        raise StepFailed(str(exc), error_type=type(exc).__name__) from None
    return plan, bundle.write_json(run_id, PLAN_PATH, plan)


def routes(resources: dict[str, Any]) -> list[Route]:
    bundle: BundleStore = resources["bundle"]
    # Tests may attach their own pre-launch check; production repeats the capacity check.
    recheck = resources.get("bench_recheck")

    async def capacity_recheck(campaign: Campaign, node: str, run_id: str) -> str | None:
        if recheck is not None:
            return await recheck(node)
        from services.capacity.check import check_node
        from services.capacity.runner import SubprocessRunner
        from services.capacity.snapshot import write_snapshot

        verdict = await asyncio.to_thread(check_node, campaign.capacity, node, run_id=run_id, runner=SubprocessRunner())
        await asyncio.to_thread(write_snapshot, bundle, verdict, campaign.capacity, folder="bench/capacity")
        return None if verdict.idle else "; ".join(verdict.reasons) or "not idle"

    async def execute(campaign: Campaign, plan: BenchPlan, event: Event, ctx: StepContext) -> list[Event]:
        producer = f"{NAME}/{ctx.settings.instance}"
        # Before any launch: a Kubernetes plan without kubectl fails here.
        executor = make_executor(plan, bundle)
        prompts = read_prompts(bundle, event.run_id, Path(PROMPTS_PATH))

        async def check(node: str) -> str | None:
            return await capacity_recheck(campaign, node, event.run_id)

        runner = Runner(
            plan, bundle, prompts, emit=ctx.emit, recheck=check,
            event_factory=lambda **fields: event.caused(BenchTrialCompleted, producer=producer, **fields),
            eval_values={"model": plan.cells[0].identity["model"], "tokenizer": campaign.target.tokenizer_dir},
            executor=executor,
        )
        outcome = await runner.execute()
        if outcome.cleaned:
            ctx.log.info("cleaned up by label", executor=plan.executor, cleaned=outcome.cleaned)
        if outcome.cleanup_error:
            ctx.log.warning("cleanup by label failed: labelled work may be left; clean up by the label",
                            executor=plan.executor, error=outcome.cleanup_error, label=f"experiment={plan.run_id}")
        standing = runner.baseline
        if standing in outcome.failed_cells:
            raise StepFailed(f"the standing cell {standing} failed, so nothing can be compared: "
                             f"{outcome.failed_cells[standing]}", error_type="StandingCellFailed")
        for cell_id, reason in outcome.failed_cells.items():
            ctx.log.error("cell failed", cell_id=cell_id, reason=reason)
        return [event.caused(BenchCompleted, producer=producer, results=outcome.results,
                             failed_cells=outcome.failed_cells, draft=plan.draft)]

    async def on_trigger(event: Event, ctx: StepContext) -> list[Event]:
        campaign = Campaign.model_validate(bundle.read_json(event.run_id, "campaign.json"))
        # Planning imports vLLM (to check speculative keys against its config class):
        # seconds of synchronous work, kept off the event loop so the lease heartbeat
        # and the broker connections keep running.
        plan, ref = await asyncio.to_thread(plan_bench, bundle, campaign, event)
        planned = event.caused(BenchPlanned, producer=f"{NAME}/{ctx.settings.instance}", plan=ref,
                               cells=[cell.cell_id for cell in plan.cells], trials=max(c.trials for c in plan.cells))
        again = announced(bundle, event.run_id, BenchPlanned.SCHEMA, ref)
        if not pre_approved(campaign):
            ctx.log.info("bench planned; waiting for an approval of its sha256", plan_sha256=ref.sha256)
            return [] if again else [planned]
        if not again:
            await ctx.emit(planned)
        return await execute(campaign, plan, event, ctx)

    def plan_ref(run_id: str) -> ArtifactRef | None:
        return stored_plan(bundle, run_id, PLAN_PATH)

    approval_key = approval_step_key(bundle, PLAN_PATH)

    async def on_approved(event: Event, ctx: StepContext) -> list[Event]:
        ref = plan_ref(event.run_id)
        if ref is None or not isinstance(event, RunApproved) or not covers(event, ref):
            return []
        campaign = Campaign.model_validate(bundle.read_json(event.run_id, "campaign.json"))
        if pre_approved(campaign):
            return []  # it ran at its trigger
        try:
            plan = BenchPlan.model_validate(bundle.read_json(event.run_id, PLAN_PATH))
        except (BundleError, ValidationError) as exc:
            raise StepFailed(f"the approved plan {ref.uri} cannot be trusted: {exc}", error_type="PlanCorrupt") from None
        return await execute(campaign, plan, event, ctx)

    return [
        Route(TrainingCompleted.SCHEMA, on_trigger, failure_step=STEP),
        Route("bench.requested", on_trigger, step_key=lambda event: event.event_id, failure_step=STEP),
        Route(RunApproved.SCHEMA, on_approved, step_key=approval_key, failure_step=STEP),
    ]
