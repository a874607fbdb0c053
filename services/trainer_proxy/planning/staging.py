"""The training plan's staging: `plan_training`, the trigger's handler, places the training, checks
where the corpus came from (`check_provenance`, docs/design.md#training-inputs-come-from-this-run),
stores its splits, looks up a reusable draft and stores the plan builder.py builds, write-once and
hashed; `skipped` records a campaign that needs no draft. Its inputs come from the trigger event, a
request's named inputs, or the run's bundle and journal. Nothing here starts a process.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from contracts import layout
from contracts.artifacts.corpus import CorpusManifest
from contracts.artifacts.profile import Profile
from contracts.campaign import Campaign
from contracts.campaign.commands import Scheduler
from contracts.envelope import ArtifactRef, Event
from contracts.events import CapacitySelected, TrainingCompleted, TrainingRequested
from contracts.inputs import CORPUS
from services.runtime.bundle.bundle import ArtifactConflict, ArtifactMissing, BundleError, BundleStore
from services.runtime.bundle.bundle_paths import InvalidPath, parse_uri
from services.runtime.delivery.upstream import latest
from services.runtime.errors import StepFailed
from services.trainer_proxy.errors import PlanError
from services.trainer_proxy.planning import reuse
from services.trainer_proxy.planning.builder import PlanPaths, build_plan
from services.trainer_proxy.planning.inputs import load_cells, skip_reason, split_corpus
from services.trainer_proxy.planning.model import KubernetesLaunch, PlanInputs, TrainingPlan


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


def placement(bundle: BundleStore, event: Event) -> tuple[Scheduler, str]:
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
    if isinstance(event, TrainingRequested) and CORPUS in event.inputs:
        return event.inputs[CORPUS]
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
        raise StepFailed(f"the corpus {ref.uri} does not have the sha256 the event names ({ref.sha256})",
                         error_type="CorpusChanged")
    return data


M = TypeVar("M", bound=BaseModel)


class CorpusMismatch(PlanError):
    """The corpus was built from another profile or other traffic than this run's profile."""


def check_provenance(bundle: BundleStore, run_id: str, corpus: ArtifactRef) -> None:
    """Refuse a corpus that was not built from this run's profile of this run's traffic.

    Reads the corpus's manifest (CorpusManifest, `layout.CORPUS_MANIFEST` beside it in its own
    run) and this run's PROFILE.json (Profile); compares the manifest's profile_sha256 with the
    profile's bytes and its traffic_sha256 with the traffic the profile read, and names both
    hashes when they differ: `--input corpus=bundle://OTHER/...` from another run is accepted
    only when it was built from this very profile."""
    corpus_run, relpath = parse_uri(corpus.uri)
    if relpath != layout.CORPUS:
        raise CorpusMismatch(
            f"the training input {corpus.uri} is not a corpus the corpus step built ({layout.CORPUS}, with its "
            f"manifest {layout.CORPUS_MANIFEST} beside it), so its profile and traffic cannot be checked: give "
            f"bundle://RUN/{layout.CORPUS}", error_type="CorpusUnverifiable")
    manifest = _read_model(bundle, corpus_run, layout.CORPUS_MANIFEST, CorpusManifest, what="corpus manifest",
                           fix=f"rebuild the corpus (specdec request corpus {corpus_run})")
    if manifest.corpus_sha256 != corpus.sha256:
        raise CorpusMismatch(
            f"the manifest bundle://{corpus_run}/{layout.CORPUS_MANIFEST} describes a corpus of sha256 "
            f"{manifest.corpus_sha256}, not {corpus.uri} (sha256 {corpus.sha256}): rebuild the corpus "
            f"(specdec request corpus {corpus_run})", error_type="CorpusUnverifiable")
    try:
        profile_ref = bundle.ref(run_id, layout.PROFILE)
    except ArtifactMissing:
        raise CorpusMismatch(
            f"run {run_id} has no profile ({layout.PROFILE}), so the traffic a training corpus must come from is "
            f"unknown: run the profile step first (specdec request profile {run_id})",
            error_type="NoProfile") from None
    profile = _read_model(bundle, run_id, layout.PROFILE, Profile, what="profile",
                          fix=f"profile the traffic again (specdec request profile {run_id})",
                          error_type="ProfileInvalid")
    problems = []
    if manifest.profile_sha256 != profile_ref.sha256:
        problems.append(f"it was built from profile sha256 {manifest.profile_sha256}, but this run's profile "
                        f"({layout.PROFILE}) has sha256 {profile_ref.sha256}")
    if manifest.traffic_sha256 != profile.input.sha256:
        problems.append(f"it was sampled from traffic sha256 {manifest.traffic_sha256}, but this run profiled "
                        f"traffic sha256 {profile.input.sha256}")
    if problems:
        raise CorpusMismatch(
            f"the corpus {corpus.uri} is not a valid training input for run {run_id}: " + "; and ".join(problems)
            + ". A corpus matched to another profile or traffic regime trains a draft for other traffic: train on "
            f"this run's own corpus (specdec request corpus {run_id}, then specdec request training {run_id}), or "
            "name a corpus built from this run's profile", error_type="CorpusMismatch")


def _read_model(bundle: BundleStore, run_id: str, relpath: str, model: type[M], *, what: str, fix: str,
                error_type: str = "CorpusUnverifiable") -> M:
    """One artifact through its contract; a missing or invalid one is a CorpusMismatch saying how to fix it."""
    try:
        return model.model_validate(bundle.read_json(run_id, relpath))
    except (BundleError, ValidationError) as exc:
        raise CorpusMismatch(f"the {what} bundle://{run_id}/{relpath} cannot be read: {exc}; {fix}",
                             error_type=error_type) from None


def plan_training(bundle: BundleStore, campaign: Campaign, event: Event) -> tuple[TrainingPlan, ArtifactRef]:
    """Store the corpus splits and the plan; the plan and its ref."""
    run_id = event.run_id
    scheduler, node = placement(bundle, event)
    corpus = corpus_ref(bundle, event)
    data = _read_corpus(bundle, corpus)
    check_provenance(bundle, run_id, corpus)
    split = split_corpus(data)
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
    plan = build_plan(campaign, run_id=run_id, node=node, scheduler=scheduler, paths=paths, inputs=inputs,
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
