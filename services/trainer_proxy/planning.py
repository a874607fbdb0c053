"""Planning a training: placement, the corpus splits, reuse, the stored plan.

`plan_training` reads what the upstream steps produced — from the trigger
event where it carries it (`capacity.selected`: the node and the corpus), a
request's named inputs, or else the run's bundle and journal
(services/runtime/upstream.py) — and stores the splits and the plan,
write-once and hashed. `skipped` records a campaign that needs no draft.
Nothing here starts a process.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from contracts import layout
from contracts.campaign import Campaign
from contracts.envelope import ArtifactRef, Event
from contracts.events import CapacitySelected, TrainingCompleted, TrainingRequested
from services.runtime.bundle import ArtifactConflict, ArtifactMissing, BundleError, BundleStore
from services.runtime.bundle_paths import InvalidPath, parse_uri
from services.runtime.errors import StepFailed
from services.runtime.upstream import latest
from services.trainer_proxy import reuse
from services.trainer_proxy.inputs import load_cells, skip_reason, split_corpus
from services.trainer_proxy.launch import KubernetesLaunch
from services.trainer_proxy.plan import PlanInputs, PlanPaths, TrainingPlan, build_plan


def skipped(bundle: BundleStore, campaign: Campaign, event: Event, producer: str) -> list[Event] | None:
    """`training.completed` with the reason when the campaign needs no draft; None when it trains."""
    reason = skip_reason(campaign, load_cells(campaign, Path.cwd()))
    if reason is None:
        return None
    bundle.write_json(event.run_id, layout.TRAINING_SKIPPED, {"skipped_reason": reason})
    # The placement and corpus travel on, so the bench need not look them up.
    place = event if isinstance(event, CapacitySelected) else None
    return [event.caused(
        TrainingCompleted, producer=producer, output=None, checkpoint_dir=None, duration_s=0.0, skipped_reason=reason,
        scheduler=place.scheduler if place else None, node=place.node if place else None,
        corpus=place.corpus if place else None,
    )]


def placement(bundle: BundleStore, event: Event) -> tuple[str, str]:
    """(scheduler, node): from capacity.selected, or for a request from the run's latest one."""
    selected = event if isinstance(event, CapacitySelected) else latest(bundle, event.run_id, CapacitySelected)
    if selected is None:
        raise StepFailed(
            f"run {event.run_id} has no capacity.selected in its journal, so no idle node is known: "
            f"run the capacity step first (specdec request capacity {event.run_id})",
            error_type="NoCapacity",
        )
    return selected.scheduler, selected.node


def corpus_ref(bundle: BundleStore, event: Event) -> ArtifactRef:
    """The corpus: capacity.selected's (from corpus.completed), a request's `corpus` input, else the run's own."""
    if isinstance(event, CapacitySelected) and event.corpus is not None:
        return event.corpus
    if isinstance(event, TrainingRequested) and "corpus" in event.inputs:
        return event.inputs["corpus"]
    try:
        return bundle.ref(event.run_id, layout.CORPUS)
    except ArtifactMissing:
        raise StepFailed(
            f"run {event.run_id} has no corpus ({layout.CORPUS}): run the corpus step first "
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
    scheduler, node = placement(bundle, event)
    corpus = corpus_ref(bundle, event)
    split = split_corpus(_read_corpus(bundle, corpus))
    if split.train_records == 0:
        raise StepFailed(
            f"the corpus {corpus.uri} has no train records ({split.heldout_records} heldout, "
            f"{split.rejected_lines} unusable lines): there is nothing to train on",
            error_type="EmptyCorpus",
        )
    try:
        train = bundle.write_bytes(run_id, layout.TRAINING_CORPUS_TRAIN, split.train)
        heldout = bundle.write_bytes(run_id, layout.TRAINING_CORPUS_HELDOUT, split.heldout)
    except ArtifactConflict:
        raise _conflict(run_id, "corpus splits", layout.TRAINING_CORPUS_TRAIN) from None
    run_dir = bundle.run_dir(run_id).absolute()
    paths = PlanPaths(
        run_dir=str(run_dir),
        cwd=str(Path.cwd()),
        corpus=str(bundle.resolve(corpus.uri)),
        corpus_train=str(run_dir / layout.TRAINING_CORPUS_TRAIN),
        corpus_heldout=str(run_dir / layout.TRAINING_CORPUS_HELDOUT),
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
    plan = build_plan(campaign, run_id=run_id, node=node, scheduler=scheduler, paths=paths, inputs=inputs,  # type: ignore[arg-type]
                      input_key=key, reuse=found, reuse_note=note)
    try:
        if isinstance(plan.launch, KubernetesLaunch):
            bundle.write_json(run_id, layout.TRAINING_K8S_JOB, plan.launch.manifest)
        ref = bundle.write_json(run_id, layout.TRAINING_PLAN, plan)
    except ArtifactConflict:
        raise _conflict(run_id, "training plan", layout.TRAINING_PLAN, _plan_difference(bundle, run_id, plan)) from None
    return plan, ref


def _stored_plan(bundle: BundleStore, run_id: str) -> TrainingPlan | None:
    """The plan an earlier delivery of this step stored, if any."""
    try:
        return TrainingPlan.model_validate(bundle.read_json(run_id, layout.TRAINING_PLAN))
    except ArtifactMissing:
        return None
    except (BundleError, ValidationError) as exc:
        raise StepFailed(f"the stored plan {layout.TRAINING_PLAN} of run {run_id} cannot be trusted: {exc}",
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
        stored = bundle.read_json(run_id, layout.TRAINING_PLAN)
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
