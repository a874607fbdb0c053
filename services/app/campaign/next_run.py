"""`specdec next RUN_ID`: the campaign that proves or rejects a run's predicted k per concurrency.

A run's campaign and bench plan are write-once, so the lever is proven in a new run: this writes its
campaign file (the standing cell, the best fixed k and the scheduled cell, the same corpus and the draft
reused by its input key) and submits nothing. Refused when the draft could not be reused
(docs/publisher.md, "`specdec next RUN_ID`").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from contracts import layout
from contracts.artifacts.profile import Profile
from contracts.artifacts.training import KeyRecord
from contracts.campaign import TRAINED_DRAFT, Campaign, Matrix
from services.publisher.prediction.schedule_plan import CandidatePlan, best, candidate_plans, proposed_cells
from services.publisher.report.aggregate import read_campaign
from services.publisher.report.model import CampaignData
from services.runtime.bundle.bundle import ArtifactMissing, BundleError, BundleStore, hash_file
from services.runtime.errors import ConfigurationError
from services.shared.formatting import concurrency, ms, percent


@dataclass(frozen=True)
class NextCampaign:
    """What `specdec next` wrote."""

    run_id: str
    path: Path
    cells: tuple[str, ...]  # standing, best fixed k, scheduled
    schedule: list[list[int]]
    draft: str  # how the draft is reused, in words ("" when no cell serves one)
    prediction: tuple[str, ...]  # one line per level


def default_path(run_id: str) -> Path:
    return Path(f"{run_id}-next.yaml")


def write_next(bundle: BundleStore, run_id: str, out: Path | None = None) -> NextCampaign:
    """Write the next campaign of `run_id` to `out` (default ./RUN_ID-next.yaml); never overwrites a file."""
    path = out or default_path(run_id)
    if path.exists():
        raise ConfigurationError(f"{path} exists: give --out a new file (specdec next never overwrites one)")
    campaign = _stored_campaign(bundle, run_id)
    data = read_campaign(bundle, run_id)
    chosen = _chosen(data, run_id)
    cells = proposed_cells(data, chosen)
    raw = campaign.model_dump(mode="json")
    matrix = campaign.matrix
    if not isinstance(matrix, Matrix):  # _stored_campaign refused it
        raise ConfigurationError(f"run {run_id}'s matrix is not inline")
    standing = next(c for c in matrix.cells if c.role == "standing").model_dump(mode="json")
    # A schedule that runs one k at every level is that fixed k: benching both would measure one config twice.
    raw["matrix"]["cells"] = [standing, cells["fixed"], *([cells["scheduled"]] if chosen.plan.varies else [])]
    raw["source_revisions"]["specdec"] = None  # filled in again at submit
    draft = ""
    if cells["scheduled"]["serving"]["speculative"].get("model") == TRAINED_DRAFT:
        draft = _reuse(bundle, run_id, campaign)
        raw["commands"]["train"]["reuse"] = True
    else:  # nothing trains: the contract refuses a trainer nothing uses
        raw["commands"]["train"] = None
        raw["source_revisions"]["trainer"] = None
        raw["review"]["pre_approve"] = [s for s in raw["review"]["pre_approve"] if s != "training"]
    try:
        Campaign.model_validate(raw)
    except ValidationError as exc:  # a campaign specdec wrote and cannot submit: say which field
        raise ConfigurationError(f"the next campaign of run {run_id} is not valid: {exc.errors()[0]['msg']}") from None
    prediction = _prediction(chosen, cells)
    schedule = cells["scheduled"]["serving"]["speculative"]["num_speculative_tokens_per_batch_size"]
    header = _header(run_id, chosen, schedule, draft=draft, prediction=prediction)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_checked(path, header + yaml.safe_dump(raw, sort_keys=False, default_flow_style=None, width=110), run_id)
    return NextCampaign(run_id=run_id, path=path, cells=tuple(c["cell_id"] for c in raw["matrix"]["cells"]),
                        schedule=schedule, draft=draft, prediction=prediction)


def _write_checked(path: Path, text: str, run_id: str) -> None:
    """Write `text` to `path` only if `specdec submit` would accept it (its own reading, every check: a
    traffic file moved away since the run, for one). Never overwrites: the file is linked into place,
    which fails if the path exists."""
    from services.app.campaign.prepare import CampaignRejected, load_campaign

    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    try:
        load_campaign(partial)
        os.link(partial, path)
    except CampaignRejected as exc:
        raise ConfigurationError(f"the next campaign of run {run_id} would not submit: "
                                 + "; ".join(exc.problems)) from None
    except FileExistsError:
        raise ConfigurationError(f"{path} exists: give --out a new file (specdec next never overwrites one)") from None
    finally:
        partial.unlink(missing_ok=True)


def _stored_campaign(bundle: BundleStore, run_id: str) -> Campaign:
    if not bundle.exists(run_id):
        raise ConfigurationError(f"no bundle for run {run_id} under {bundle.root}: check the run ID and "
                                 "SPECDEC_BUNDLE_ROOT")
    try:
        campaign = Campaign.model_validate(bundle.read_json(run_id, layout.CAMPAIGN))
    except ArtifactMissing:
        raise ConfigurationError(f"run {run_id} has no {layout.CAMPAIGN}: it was never submitted") from None
    except ValidationError as exc:
        raise ConfigurationError(f"run {run_id}'s {layout.CAMPAIGN} is not a valid campaign "
                                 f"({exc.errors()[0]['msg']})") from None
    if not isinstance(campaign.matrix, Matrix):
        raise ConfigurationError(f"run {run_id}'s {layout.CAMPAIGN} names its matrix by path: submit stores it "
                                 "inline, so this campaign was not stored by specdec submit")
    return campaign


def _chosen(data: CampaignData, run_id: str) -> CandidatePlan:
    chosen = best(candidate_plans(data))
    if chosen is None:
        raise ConfigurationError(
            f"run {run_id} has no speculative candidate with spec-decode counters and a measured cost at any level: "
            f"there is no k per concurrency to prove (bench it first: specdec request bench {run_id})")
    if not any(chosen.plan.chosen):
        raise ConfigurationError(
            f"no k of 1..{chosen.plan.k_max} is predicted to pay at any measured level of run {run_id} (best "
            f"candidate {chosen.cell_id}): the standing config stands and there is no schedule to prove")
    return chosen


def _reuse(bundle: BundleStore, run_id: str, campaign: Campaign) -> str:
    """How the draft is reused, or why it cannot be (refused)."""
    try:
        record = KeyRecord.model_validate(bundle.read_json(run_id, layout.TRAINING_INPUT_KEY))
    except (ArtifactMissing, BundleError, ValidationError, ValueError):
        raise ConfigurationError(
            f"run {run_id} recorded no training input key ({layout.TRAINING_INPUT_KEY}): its draft cannot be reused "
            "by key and specdec next does not retrain; let the run's training complete first") from None
    traffic = getattr(campaign.traffic, "path", None)
    recorded = _profiled_sha(bundle, run_id)
    if traffic and recorded:
        try:
            now, _ = hash_file(Path(traffic))
        except OSError:
            raise ConfigurationError(f"the traffic file {traffic} of run {run_id} cannot be read: the next run "
                                     "profiles and samples it again; restore it") from None
        if now != recorded:
            raise ConfigurationError(
                f"the traffic file {traffic} changed since run {run_id} profiled it (sha256 {recorded[:12]}... then, "
                f"{now[:12]}... now): the corpus, and with it the training input key, would differ and the draft "
                "would be trained again; restore the file")
    return (f"the draft of run {record.reused_from or run_id} by training input key {record.key} "
            "(commands.train.reuse: true; the training plan names the run it copies, nothing is launched)")


def _profiled_sha(bundle: BundleStore, run_id: str) -> str | None:
    try:
        return Profile.model_validate(bundle.read_json(run_id, layout.PROFILE)).input.sha256
    except (ArtifactMissing, BundleError, ValidationError, ValueError):
        return None


def _prediction(chosen: CandidatePlan, cells: dict[str, dict[str, Any]]) -> tuple[str, ...]:
    fixed = chosen.plan.fixed_k
    out = []
    for lv, k in zip(chosen.plan.levels, chosen.plan.chosen, strict=True):
        sched = f"; {cells['scheduled']['cell_id']} (k {k}) {ms(lv.tpot_ms(k))}" if chosen.plan.varies else ""
        out.append(f"concurrency {concurrency(lv.concurrency)}: standing {ms(lv.baseline_tpot_ms)} (measured); "
                   f"{cells['fixed']['cell_id']} (k {fixed}) {ms(lv.tpot_ms(fixed))}{sched} (predicted)")
    return tuple(out)


def _header(run_id: str, chosen: CandidatePlan, schedule: list[list[int]], *, draft: str,
            prediction: tuple[str, ...]) -> str:
    lines = [
        f"specdec next {run_id}: proves or rejects the k per concurrency predicted from {chosen.cell_id}'s measured",
        f"acceptance and cost: num_speculative_tokens_per_batch_size {schedule}, against the best fixed k",
        f"{chosen.plan.fixed_k} (predicted {percent((chosen.plan.gain - 1) * 100)}), beside the standing cell."
        + ("" if chosen.plan.varies else " The schedule runs one k at every level: it is the fixed k, benched "
           "alone."),
        "Predicted TPOT per level (the new run's decision is set beside it):",
        *(f"  {line}" for line in prediction),
        f"Same target, traffic and corpus spec as run {run_id}: the same corpus."
        + (f" Draft: {draft}." if draft else ""),
        f"No trial is pooled with run {run_id}: submit this file (specdec submit) for a new run.",
    ]
    return "".join(f"# {line}\n" for line in lines)
