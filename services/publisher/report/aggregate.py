"""Read a run's campaign from its evidence bundle into `CampaignData`.

Everything is read through the BundleStore, so every artifact's bytes are checked against their recorded
sha256; an unreadable input is a problem the report lists, never a crash, and a missing campaign.json is
tolerated. What is read: docs/publisher.md#what-the-report-is-rendered-from. `read_campaign` does the
I/O; `step_statuses` is pure."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from contracts import layout
from contracts.artifacts.corpus import CorpusManifest
from contracts.artifacts.decision import Decision
from contracts.artifacts.engine import EngineCheck
from contracts.artifacts.training import KeyRecord
from contracts.campaign import Campaign
from contracts.envelope import KEY_RE, RUN_ID_PATTERN
from services.publisher.errors import ReportInputError
from services.publisher.prediction.prediction_inputs import (
    read_draft_cost,
    read_ngram_advice,
    read_offline_acceptance,
    read_suffix_prediction,
)
from services.publisher.publish.review_record import plan_reviews, with_views
from services.publisher.report.canonical_section import read_canonical, read_intent
from services.publisher.report.model import (
    EVIDENCE_STEPS,
    CampaignData,
    LaunchEngine,
    StepStatus,
)
from services.publisher.report.target_model import read_target_build
from services.publisher.report.trials import (
    LoadedTrial,
    build_arms,
    cell_of,
    read_rejected,
    read_trials,
    split_rejected,
)
from services.runtime.bundle.bundle import ArtifactMissing, BundleError, BundleStore
from services.runtime.bundle.bundle_events import EventScan

# Events that settle a step: the last one of a step (journal order) decides its state.
DONE_EVENTS: dict[str, str] = {
    "profile.completed": "profile",
    "corpus.completed": "corpus",
    "capacity.selected": "capacity",
    "training.completed": "training",
    "bench.completed": "bench",
    "gate.decided": "gate",
}
FAILED_EVENTS: dict[str, str] = ({f"{step}.failed": step for step in EVIDENCE_STEPS}
                                 | {"capacity.unavailable": "capacity"})


def read_campaign(bundle: BundleStore, run_id: str, *, extra_events: Sequence[Mapping[str, Any]] = ()) -> CampaignData:
    """The run's campaign. `extra_events` are events in hand that the journal may not have appended yet
    (the gate.decided a service is reacting to)."""
    if not bundle.exists(run_id):
        raise ReportInputError(
            f"no bundle for run {run_id} under {bundle.root}: check the run ID and SPECDEC_BUNDLE_ROOT")
    problems: list[str] = []
    campaign = _read_model(bundle, run_id, layout.CAMPAIGN, Campaign, problems=problems)
    decision = _read_model(bundle, run_id, layout.DECISION, Decision, problems=problems)
    decision_sha = bundle.ref(run_id, layout.DECISION).sha256 if decision is not None else None
    plan = _read_json(bundle, run_id, layout.BENCH_PLAN, problems)
    loaded = read_trials(bundle, run_id, problems)
    loaded, rejected = split_rejected(loaded, campaign.target.max_model_len if campaign is not None else None)
    rejected = [*read_rejected(bundle, run_id, problems), *rejected]
    if not loaded and plan is None:
        raise ReportInputError(
            f"run {run_id} has no trial results ({layout.trial_result('<cell>', '<n>', '<k>')}) and no bench plan "
            "in its bundle: run the bench step first (specdec request bench RUN_ID)"
        )
    scan = bundle.scan_events(run_id)
    problems += journal_problems(scan)
    events = _merge_events(scan.events, extra_events)
    bench_done = [e for e in events if e.get("schema") == "bench.completed"]
    last_bench = bench_done[-1] if bench_done else {}
    reused_from, input_key = _draft_origin(bundle, run_id, events, problems)
    advice, advice_note = read_ngram_advice(bundle, run_id, problems)
    cost, cost_note = read_draft_cost(bundle, run_id, problems)
    suffix, suffix_note = read_suffix_prediction(bundle, run_id, problems)
    offline, offline_note, output_dir = read_offline_acceptance(bundle, run_id, problems)
    build, build_note = read_target_build(bundle, run_id, problems)
    return CampaignData(
        run_id=run_id,
        campaign=campaign,
        decision=decision,
        decision_sha256=decision_sha,
        plan=plan if isinstance(plan, dict) else None,
        steps=step_statuses(events, decision_present=decision is not None),
        journal_present=bundle.events_path(run_id).is_file(),
        arms=build_arms(loaded, plan=plan if isinstance(plan, dict) else None, campaign=campaign, rejected=rejected),
        bench_exploratory=bool(last_bench.get("draft")) or bool(isinstance(plan, dict) and plan.get("draft")),
        failed_cells={str(k): str(v) for k, v in (last_bench.get("failed_cells") or {}).items()},
        problems=problems,
        draft_reused_from=reused_from,
        draft_input_key=input_key,
        rejected=rejected,
        engine=_read_engine(bundle, run_id, plan if isinstance(plan, dict) else None, loaded, problems=problems),
        redaction=_read_redaction(bundle, run_id, problems),
        ngram_advice=advice, ngram_advice_note=advice_note, draft_cost=cost, draft_cost_note=cost_note,
        suffix_prediction=suffix, suffix_prediction_note=suffix_note,
        offline_acceptance=offline, offline_acceptance_note=offline_note, training_output_dir=output_dir,
        target_build=build, target_build_note=build_note,
        canonical=read_canonical(bundle, run_id, problems), intent=read_intent(bundle, run_id, problems),
        reviews=with_views(bundle, run_id, plan_reviews(events, campaign)),
    )


def journal_problems(scan: EventScan) -> list[str]:
    """A DRAFT reason only while an event a torn line names is missing from events.jsonl. A torn line is
    an append the journal never acked (it acks once the whole line is fsynced), so its event is delivered
    again and appended whole; the line itself is kept aside (services/runtime/bundle/bundle_events.py),
    and a fragment too short to name its event says nothing is missing (what Redis lost meanwhile,
    the manifest's lost_events name)."""
    if not scan.missing:
        return []
    count = len(scan.missing)
    return [f"{layout.EVENTS} lacks {count} event{'' if count == 1 else 's'} a torn line names "
            f"({', '.join(scan.missing[:5])}): it comes back when delivered again"]


def _read_redaction(bundle: BundleStore, run_id: str, problems: list[str]) -> Any:
    """The corpus manifest's redaction block; None when the run built no corpus (named shapes)."""
    try:
        bundle.ref(run_id, layout.CORPUS_MANIFEST)
    except ArtifactMissing:
        return None
    manifest = _read_model(bundle, run_id, layout.CORPUS_MANIFEST, CorpusManifest, problems=problems)
    return manifest.redaction if manifest is not None else None


def _draft_origin(
    bundle: BundleStore, run_id: str, events: Sequence[Mapping[str, Any]], problems: list[str]
) -> tuple[str | None, str | None]:
    """(the run whose draft was reused, the training input key), each None when the run does not say."""
    training = [e for e in events if e.get("schema") == "training.completed"]
    reused = training[-1].get("reused_from") if training else None
    # The trainer-proxy's own record model: an invalid record is a problem, and its key is not shown.
    record = _read_model(bundle, run_id, layout.TRAINING_INPUT_KEY, KeyRecord, problems=problems)
    if reused is not None and not (isinstance(reused, str) and re.fullmatch(RUN_ID_PATTERN, reused)):
        problems.append(f"training.completed names an invalid reused_from {reused!r}")
        reused = None
    return reused, record.key if record is not None else None


# --- pure builders -------------------------------------------------------------


def step_statuses(events: Iterable[Mapping[str, Any]], *, decision_present: bool) -> list[StepStatus]:
    """The last outcome of every evidence step, in flow order."""
    last: dict[str, StepStatus] = {}
    for event in events:
        schema = str(event.get("schema", ""))
        if schema in DONE_EVENTS:
            step = DONE_EVENTS[schema]
            skipped = event.get("skipped_reason")
            reused = event.get("reused_from")
            detail = f"{schema}: {skipped}" if skipped else schema
            if reused and not skipped:
                detail = f"{schema}: draft model reused from run {reused} (identical training inputs; nothing trained)"
            last[step] = StepStatus(step=step, state="skipped" if skipped else "done", detail=detail)
        elif schema in FAILED_EVENTS:
            step = FAILED_EVENTS[schema]
            why = event.get("reason") or "; ".join(event.get("reasons") or []) or "no reason given"
            last[step] = StepStatus(step=step, state="failed", detail=f"{schema}: {why}")
    if "gate" not in last and decision_present:
        # The journal may not have appended gate.decided yet; the artifact is the evidence.
        last["gate"] = StepStatus(step="gate", state="done", detail=f"{layout.DECISION} in the bundle")
    return [last.get(step) or StepStatus(step=step, state="missing", detail=None) for step in EVIDENCE_STEPS]


def _merge_events(journal: list[dict[str, Any]], extra: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    seen = {e.get("event_id") for e in journal}
    return [*journal, *(dict(e) for e in extra if e.get("event_id") not in seen)]


# --- I/O -------------------------------------------------------------------------


def _read_json(bundle: BundleStore, run_id: str, relpath: str, problems: list[str]) -> Any:
    try:
        return bundle.read_json(run_id, relpath)
    except ArtifactMissing:
        return None
    except BundleError as exc:
        problems.append(f"{relpath}: {exc}")
        return None


def _read_model(bundle: BundleStore, run_id: str, relpath: str, model: type[BaseModel], *, problems: list[str]) -> Any:
    raw = _read_json(bundle, run_id, relpath, problems)
    if raw is None:
        return None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]["msg"]
        problems.append(f"{relpath} is not a valid {model.__name__}: {exc.error_count()} error(s), first: {first}")
        return None


def _read_engine(
    bundle: BundleStore, run_id: str, plan: Mapping[str, Any] | None, loaded: Sequence[LoadedTrial], *,
    problems: list[str],
) -> list[LaunchEngine]:
    """Every launch's engine read-back: the plan's launches in order (a launch without one: not read back),
    then files no plan names, then cells with results but no launch at all."""
    run_dir = bundle.run_dir(run_id)
    found = sorted({p.relative_to(run_dir).as_posix() for g in layout.ENGINE_CHECK_GLOBS for p in run_dir.glob(g)})
    rows: list[LaunchEngine] = []
    used: set[str] = set()
    launches = plan.get("launches") if plan else None
    for index, launch in enumerate(launches if isinstance(launches, list) else []):
        cell = launch.get("cell_id") if isinstance(launch, dict) else None
        if not (isinstance(cell, str) and KEY_RE.match(cell)):
            continue
        folder = layout.launch_folder(cell, index)
        first, later = layout.engine_check(folder), layout.engine_check(layout.attempt_folder(folder, "*"))
        # The first attempt's, then later attempts' in order (attempt_folder).
        mine = sorted((p for p in found if p == first or fnmatch.fnmatch(p, later)),
                      key=lambda p: (p != first, len(p), p))
        used |= set(mine)
        rows += [_engine_row(bundle, run_id, p, cell=cell, index=index, problems=problems) for p in mine] or [
            LaunchEngine(cell_id=cell, launch=index, path=None, check=None)]
    for relpath in found:
        cell = relpath.split("/")[1]  # contracts.layout.launch_folder: bench/<cell_id>/launch-<i>
        if relpath not in used and KEY_RE.match(cell):
            rows.append(_engine_row(bundle, run_id, relpath, cell=cell, index=None, problems=problems))
    served = {row.cell_id for row in rows}
    for cell in sorted({cell_of(item) for item in loaded} - served):
        rows.append(LaunchEngine(cell_id=cell, launch=None, path=None, check=None))
    return rows


def _engine_row(
    bundle: BundleStore, run_id: str, relpath: str, *, cell: str, index: int | None, problems: list[str]
) -> LaunchEngine:
    check = _read_model(bundle, run_id, relpath, EngineCheck, problems=problems)
    if check is not None:
        cell, index = check.cell_id, check.launch if index is None else index
    return LaunchEngine(cell_id=cell, launch=index, path=relpath, check=check)
