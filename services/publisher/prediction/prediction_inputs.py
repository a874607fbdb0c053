"""Read what the report's predictions need besides the trials: the profile's ngram advice, the draft's cost
and the trained draft's offline acceptance.

All are advice and model inputs, not evidence: an absent or invalid file is a note in its section, never a
DRAFT reason; only bytes that do not match their recorded sha256 are a problem
(docs/publisher.md#what-the-report-is-rendered-from)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from contracts import layout
from contracts.artifacts.offline_acceptance import OFFLINE_ACCEPTANCE_FILE, OfflineAcceptance
from contracts.artifacts.profile import NgramAdvice, Profile
from contracts.artifacts.suffix import SuffixPrediction
from contracts.artifacts.training import DraftCost, OutputManifest
from services.runtime.bundle.bundle import (
    ArtifactMissing,
    BundleError,
    BundleStore,
    InvalidContent,
)


def read_ngram_advice(bundle: BundleStore, run_id: str, problems: list[str]) -> tuple[NgramAdvice | None, str | None]:
    """(the profile's ngram advice, why there is none)."""
    profile, note = _read(bundle, run_id, layout.PROFILE, Profile, problems=problems)
    if profile is None:
        return None, note
    if profile.ngram_advice is None:
        return None, f"{layout.PROFILE} predates ngram advice (written by an older profiler): profile the traffic again"
    return profile.ngram_advice, None


def read_suffix_prediction(bundle: BundleStore, run_id: str,
                           problems: list[str]) -> tuple[SuffixPrediction | None, str | None]:
    """(the profiler's suffix prediction, why there is none)."""
    return _read(bundle, run_id, layout.PROFILE_SUFFIX, SuffixPrediction, problems=problems)


def read_draft_cost(bundle: BundleStore, run_id: str, problems: list[str]) -> tuple[DraftCost | None, str | None]:
    """(the draft's measured cost, why there is none)."""
    return _read(bundle, run_id, layout.TRAINING_DRAFT_COST, DraftCost, problems=problems)


def read_offline_acceptance(bundle: BundleStore, run_id: str,
                            problems: list[str]) -> tuple[OfflineAcceptance | None, str | None, str | None]:
    """(the trained draft's offline acceptance, why there is none, the trainer's output folder).

    The trainer's outputs are what `training/outputs.json` lists (the trainer-proxy hashed them with the
    checkpoint, a reused draft's copy included), so the estimate is the listed file of that name, and
    the folder it names is how a resolved draft path is known as the trained draft."""
    manifest, note = _read(bundle, run_id, layout.TRAINING_OUTPUTS, OutputManifest, problems=problems)
    if manifest is None:
        return None, note, None
    entry = next((f for f in manifest.files if f.path == OFFLINE_ACCEPTANCE_FILE), None)
    if entry is None or entry.kind != "file":
        return None, (f"the trainer wrote no {OFFLINE_ACCEPTANCE_FILE} ({layout.TRAINING_OUTPUTS} lists no such "
                      "file)"), manifest.output_dir
    relpath = f"{layout.TRAINING_OUTPUT_DIR}/{entry.path}"
    found, note = _read(bundle, run_id, relpath, OfflineAcceptance, problems=problems)
    if found is not None and bundle.ref(run_id, relpath).sha256 != entry.sha256:
        return None, f"{relpath} is not the file {layout.TRAINING_OUTPUTS} hashed", manifest.output_dir
    return found, note, manifest.output_dir


def _read(
    bundle: BundleStore, run_id: str, relpath: str, model: type[BaseModel], *, problems: list[str]
) -> tuple[Any, str | None]:
    try:
        raw = bundle.read_json(run_id, relpath)
    except ArtifactMissing:
        return None, f"no {relpath} in the bundle"
    except InvalidContent as exc:
        return None, f"{relpath} is not JSON ({exc})"
    except BundleError as exc:
        problems.append(f"{relpath}: {exc}")
        return None, f"{relpath} is unreadable ({exc})"
    try:
        return model.model_validate(raw), None
    except ValidationError as exc:
        first = exc.errors()[0]["msg"]
        return None, f"{relpath} is not a valid {model.__name__} ({exc.error_count()} error(s), first: {first})"
