"""Trainer-proxy entrypoint: plan the training, wait for its approval, run it.

Routes (every failure is `training.failed`, the run halts there):
- `capacity.selected`, `training.requested`: the trigger. A campaign that
  needs no draft records training as skipped (`training.completed` with the
  reason, no plan). Otherwise: the corpus splits are stored, the training
  input key computed and, unless commands.train.reuse is false, the bundle
  root searched for an earlier run's identical draft (services.trainer_proxy.
  reuse); the plan (training, or reusing that draft) is stored,
  `training.planned` is emitted, and the plan runs at once only when the
  campaign carries the cluster acknowledgement (services.runtime.approval).
- `run.approved`: runs the stored plan when the approval covers its sha256
  and the campaign did not pre-approve it. Step key = the plan's sha256, so
  one approval runs a plan once; an approval that does not cover the plan
  does nothing and is keyed by its own event ID, so a later, right approval
  still runs it.
"""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from contracts import layout
from contracts.campaign import Campaign
from contracts.catalogue import TRAINER
from contracts.envelope import ArtifactRef, Event
from contracts.events import CapacitySelected, RunApproved, TrainingCompleted, TrainingFailed, TrainingPlanned, TrainingRequested
from services.runtime.approval import announced, approval_step_key, covers, pre_approved, stored_plan
from services.runtime.bundle import ArtifactConflict, ArtifactMissing, BundleError, BundleStore
from services.runtime.bundle_paths import InvalidPath, parse_uri
from services.runtime.bundle_records import CAMPAIGN_RELPATH
from services.runtime.consumer import Route, StepContext
from services.runtime.errors import StepFailed
from services.shared.capacity.recheck import RecheckFn
from services.shared.capacity.recheck import recheck as capacity_recheck
from services.trainer_proxy import kubernetes, reuse
from services.trainer_proxy.errors import PlanError, TrainingStopped
from services.trainer_proxy.execute import Approved, execute
from services.trainer_proxy.inputs import latest_event, load_cells, skip_reason, split_corpus
from services.trainer_proxy.launch import KubernetesLaunch
from services.trainer_proxy.plan import (
    CORPUS_HELDOUT_PATH,
    CORPUS_TRAIN_PATH,
    PLAN_PATH,
    PlanInputs,
    PlanPaths,
    TrainingPlan,
    build_plan,
)

NAME = TRAINER
STEP = "training"
CORPUS_PATH = "corpus/CORPUS.jsonl"
SKIPPED_PATH = "training/skipped.json"


def load_campaign(bundle: BundleStore, run_id: str) -> Campaign:
    try:
        return Campaign.model_validate(bundle.read_json(run_id, CAMPAIGN_RELPATH))
    except ArtifactMissing:
        raise StepFailed(
            f"run {run_id} has no {CAMPAIGN_RELPATH} in its bundle: submit the campaign (specdec submit) first",
            error_type="CampaignMissing",
        ) from None
    except (BundleError, ValidationError) as exc:
        raise StepFailed(f"the stored campaign of run {run_id} is unusable: {exc}", error_type="CampaignInvalid") from None


def _placement(bundle: BundleStore, event: Event) -> tuple[str, str]:
    """(scheduler, node): from capacity.selected, or for a request from the run's journal."""
    if isinstance(event, CapacitySelected):
        return event.scheduler, event.node
    selected = latest_event(bundle.events(event.run_id), CapacitySelected.SCHEMA)
    if selected is None:
        raise StepFailed(
            f"run {event.run_id} has no capacity.selected in its journal, so no idle node is known: "
            f"run the capacity step first (specdec request capacity {event.run_id})",
            error_type="NoCapacity",
        )
    return str(selected["scheduler"]), str(selected["node"])


def _corpus_ref(bundle: BundleStore, event: Event) -> ArtifactRef:
    """The corpus: a request's `corpus` input, else corpus.completed's, else corpus/CORPUS.jsonl."""
    if isinstance(event, TrainingRequested) and "corpus" in event.inputs:
        return event.inputs["corpus"]
    completed = latest_event(bundle.events(event.run_id), "corpus.completed")
    if completed is not None and completed.get("corpus"):
        return ArtifactRef.model_validate(completed["corpus"])
    try:
        return bundle.ref(event.run_id, CORPUS_PATH)
    except ArtifactMissing:
        raise StepFailed(
            f"run {event.run_id} has no corpus ({CORPUS_PATH}): run the corpus step first "
            f"(specdec request corpus {event.run_id})",
            error_type="NoCorpus",
        ) from None


def _read_corpus(bundle: BundleStore, ref: ArtifactRef) -> bytes:
    try:
        run_id, relpath = parse_uri(ref.uri)
        data = bundle.read_bytes(run_id, relpath)
    except (BundleError, InvalidPath) as exc:
        raise StepFailed(f"the corpus {ref.uri} cannot be read: {exc}", error_type="CorpusUnreadable") from None
    if bundle.ref(run_id, relpath).sha256 != ref.sha256:
        raise StepFailed(f"the corpus {ref.uri} does not have the sha256 the event names ({ref.sha256})", error_type="CorpusChanged")
    return data


def plan_training(bundle: BundleStore, campaign: Campaign, event: Event) -> tuple[TrainingPlan, ArtifactRef]:
    """Store the corpus splits and the plan; the plan and its ref."""
    run_id = event.run_id
    scheduler, node = _placement(bundle, event)
    corpus = _corpus_ref(bundle, event)
    split = split_corpus(_read_corpus(bundle, corpus))
    if split.train_records == 0:
        raise StepFailed(
            f"the corpus {corpus.uri} has no train records ({split.heldout_records} heldout, "
            f"{split.rejected_lines} unusable lines): there is nothing to train on",
            error_type="EmptyCorpus",
        )
    try:
        train = bundle.write_bytes(run_id, CORPUS_TRAIN_PATH, split.train)
        heldout = bundle.write_bytes(run_id, CORPUS_HELDOUT_PATH, split.heldout)
    except ArtifactConflict:
        raise _conflict(run_id, "corpus splits", CORPUS_TRAIN_PATH) from None
    run_dir = bundle.run_dir(run_id).absolute()
    paths = PlanPaths(
        run_dir=str(run_dir),
        cwd=str(Path.cwd()),
        corpus=str(bundle.resolve(corpus.uri)),
        corpus_train=str(run_dir / CORPUS_TRAIN_PATH),
        corpus_heldout=str(run_dir / CORPUS_HELDOUT_PATH),
    )
    inputs = PlanInputs(
        corpus=corpus, corpus_train=train, corpus_heldout=heldout, train_records=split.train_records,
        heldout_records=split.heldout_records, rejected_lines=split.rejected_lines,
    )
    command = campaign.commands.train
    stored = _stored_plan(bundle, run_id)
    try:
        key, why = reuse.compute_key(campaign, inputs, paths.cwd) if command is not None else (None, "")
        found, note = None, why
        if stored is not None and stored.input_key == key:
            # A redelivered trigger: the stored plan's reuse choice stands (other runs may
            # have completed since); every other input is recomputed and must match it.
            found, note = stored.reuse, stored.reuse_note
        elif key is not None and command is not None and command.reuse:
            lookup = reuse.find_reusable(bundle, key, run_id)
            found, note = lookup.found, lookup.note
    except OSError as exc:
        raise StepFailed(f"the training inputs cannot be hashed: {exc}; check that the target and the files the "
                         "trainer's argv names are readable", error_type="InputsUnreadable") from None
    try:
        plan = build_plan(campaign, run_id=run_id, node=node, scheduler=scheduler, paths=paths, inputs=inputs,  # type: ignore[arg-type]
                          input_key=key, reuse=found, reuse_note=note)
    except PlanError as exc:
        raise StepFailed(str(exc), error_type=type(exc).__name__) from None
    try:
        if isinstance(plan.launch, KubernetesLaunch):
            bundle.write_json(run_id, kubernetes.MANIFEST_PATH, plan.launch.manifest)
        ref = bundle.write_json(run_id, PLAN_PATH, plan)
    except ArtifactConflict:
        raise _conflict(run_id, "training plan", PLAN_PATH, _plan_difference(bundle, run_id, plan)) from None
    return plan, ref


def _stored_plan(bundle: BundleStore, run_id: str) -> TrainingPlan | None:
    """The plan an earlier delivery of this step stored, if any."""
    try:
        return TrainingPlan.model_validate(bundle.read_json(run_id, PLAN_PATH))
    except ArtifactMissing:
        return None
    except (BundleError, ValidationError) as exc:
        raise StepFailed(f"the stored plan {PLAN_PATH} of run {run_id} cannot be trusted: {exc}",
                         error_type="PlanCorrupt") from None


def _conflict(run_id: str, what: str, path: str, difference: str = "") -> StepFailed:
    return StepFailed(
        f"run {run_id} already holds different {what} ({path}): the inputs changed since it was planned"
        f"{difference}; plans, splits and outputs are write-once, so submit a new run to train with other inputs",
        error_type="PlanConflict",
    )


def _plan_difference(bundle: BundleStore, run_id: str, plan: TrainingPlan) -> str:
    """Which top-level parts of the stored plan differ from the new one, in words."""
    try:
        stored = bundle.read_json(run_id, PLAN_PATH)
    except BundleError:
        return ""
    fresh = plan.model_dump(mode="json")
    changed = sorted(key for key in set(stored) | set(fresh) if stored.get(key) != fresh.get(key))
    if not changed:
        return ""
    note = f" (plan fields that differ: {', '.join(changed)}"
    if "input_key" in changed:
        note += ("; the training input key hashes every file the trainer's argv names, so a file the trainer "
                 "or anything else rewrites between deliveries must not be named in commands.train.argv")
    return note + ")"


def _failed(event: Event, producer: str, exc: TrainingStopped) -> TrainingFailed:
    return event.caused(
        TrainingFailed, producer=producer, step=STEP, reason=exc.reason, error_type=exc.error_type, artifacts=exc.artifacts
    )


def routes(resources: dict[str, Any]) -> list[Route]:
    bundle: BundleStore = resources["bundle"]
    # Tests may attach their own pre-launch check; production repeats the capacity check.
    recheck: RecheckFn = resources.get("training_recheck") or partial(capacity_recheck, folder=layout.TRAINING_RECHECK_DIR)

    async def run(approved: Approved, event: Event, ctx: StepContext, producer: str) -> list[Event]:
        try:
            return [await execute(bundle, approved, event, ctx, recheck)]
        except TrainingStopped as exc:
            ctx.log.warning("training stopped", reason=exc.reason, error_type=exc.error_type)
            return [_failed(event, producer, exc)]

    async def on_trigger(event: Event, ctx: StepContext) -> list[Event]:
        producer = f"{NAME}/{ctx.settings.instance}"
        campaign = load_campaign(bundle, event.run_id)
        try:
            reason = skip_reason(campaign, load_cells(campaign, Path.cwd()))
        except PlanError as exc:
            raise StepFailed(str(exc), error_type=type(exc).__name__) from None
        if reason is not None:
            bundle.write_json(event.run_id, SKIPPED_PATH, {"skipped_reason": reason})
            return [event.caused(
                TrainingCompleted, producer=producer, output=None, checkpoint_dir=None, duration_s=0.0, skipped_reason=reason
            )]
        # Hashing the target and verifying an earlier draft read files: off the event loop.
        plan, ref = await asyncio.to_thread(plan_training, bundle, campaign, event)
        planned = event.caused(TrainingPlanned, producer=producer, plan=ref, executor=plan.executor, node=plan.node)
        again = announced(bundle, event.run_id, TrainingPlanned.SCHEMA, ref)
        if not pre_approved(campaign):
            ctx.log.info("training planned; waiting for an approval of its sha256", plan_sha256=ref.sha256,
                         reused_from=plan.reuse.from_run if plan.reuse else None)
            return [] if again else [planned]
        if not again:
            await ctx.emit(planned)
        return await run(Approved(plan=plan, ref=ref, campaign=campaign), event, ctx, producer)

    def plan_ref(run_id: str) -> ArtifactRef | None:
        return stored_plan(bundle, run_id, PLAN_PATH)

    approval_key = approval_step_key(bundle, PLAN_PATH)

    async def on_approved(event: Event, ctx: StepContext) -> list[Event]:
        ref = plan_ref(event.run_id)
        if ref is None or not isinstance(event, RunApproved) or not covers(event, ref):
            ctx.log.info("approval does not cover the training plan; nothing runs",
                         plan_sha256=ref.sha256 if ref else None)
            return []
        campaign = load_campaign(bundle, event.run_id)
        if pre_approved(campaign):
            ctx.log.info("the campaign pre-approved this plan; it ran at its trigger")
            return []
        try:
            plan = TrainingPlan.model_validate(bundle.read_json(event.run_id, PLAN_PATH))
        except (BundleError, ValidationError) as exc:
            # read_json re-hashes the bytes: a plan changed after approval never runs.
            raise StepFailed(f"the approved plan {ref.uri} cannot be trusted: {exc}", error_type="PlanCorrupt") from None
        return await run(Approved(plan=plan, ref=ref, campaign=campaign), event, ctx, f"{NAME}/{ctx.settings.instance}")

    return [
        Route(CapacitySelected.SCHEMA, on_trigger, step_key=lambda event: event.event_id, failure_step=STEP),
        Route(TrainingRequested.SCHEMA, on_trigger, step_key=lambda event: event.event_id, failure_step=STEP),
        Route(RunApproved.SCHEMA, on_approved, step_key=approval_key, failure_step=STEP),
    ]
