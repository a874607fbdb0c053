"""Read a run's campaign from its evidence bundle into `CampaignData`.

Inputs, all from `<bundle_root>/<run_id>/` and read through the BundleStore (so
every artifact's bytes are checked against the sha256 recorded when written):
`campaign.json`, `events.jsonl`, every `bench/<cell_id>/trial-<n>/result-c<k>.json`
(parsed by `contracts.artifacts.results.parse_trial`, the gate's own reader, so the report
and the gate read the same figures), `gate/DECISION.json`, `bench/plan.json` and
the trainer-proxy's `training/input-key.json` (`contracts.artifacts.training.KeyRecord`)
when present, the profile's ngram advice, the draft's cost and the trained draft's offline acceptance (prediction_inputs.py), the bench's rejected trials (`contracts.layout.REJECTED_GLOB`)
and every launch's engine read-back (`contracts.layout.engine_check`,
`contracts/artifacts/engine.py`); from the journal, what approved each plan at the review
point (review_record.py). Paths are `contracts.layout`'s. A missing campaign.json is
tolerated (the report says so), unlike in the steps that need one.

Rejected trials never reach an arm, so no figure or plot holds them: the
bench's, and every result whose counters the spec-decode rule
(contracts/artifacts/speculation.py, re-checked here as the gate does, with the
campaign's max_model_len) rejects. They are listed with their reasons.

`read_campaign` does the I/O; `build_arms` and `step_statuses` are pure.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError

from contracts import layout
from contracts.campaign import Campaign, Matrix
from contracts.artifacts.corpus import CorpusManifest
from contracts.artifacts.decision import Decision
from contracts.artifacts.engine import EngineCheck
from contracts.envelope import KEY_RE, RUN_ID_PATTERN
from contracts.artifacts.results import TrialIdentity
from contracts.artifacts.training import KeyRecord
from contracts.artifacts.trials import MetricKey, Trial, parse_trial, trial_value
from services.publisher.errors import ReportInputError
from services.publisher.prediction.prediction_inputs import (
    read_draft_cost,
    read_ngram_advice,
    read_offline_acceptance,
    read_suffix_prediction,
)
from services.publisher.publish.review_record import plan_reviews
from services.publisher.report.canonical_section import read_canonical, read_intent
from services.publisher.report.target_model import read_target_build
from services.publisher.report.model import (
    EVIDENCE_STEPS,
    ArmLevel,
    CampaignData,
    LaunchEngine,
    RejectedTrial,
    StepStatus,
    TrialFigures,
    arm_key,
)
from services.runtime.bundle.bundle import ArtifactMissing, BundleError, BundleStore
from services.shared.results import recheck, rejected_files, result_files

# The parts of a trial result's path (contracts.layout.trial_result) that name
# its trial and concurrency, for files without an identity block.
_TRIAL_DIR_RE = re.compile(r"^trial-([0-9]+)$")
_RESULT_RE = re.compile(r"^result-c([0-9]+)\.json$")
_REJECTED_RE = re.compile(r"^rejected-c([0-9]+)\.json$")

# Events that settle a step: the last one of a step (journal order) decides its state.
DONE_EVENTS: dict[str, str] = {
    "profile.completed": "profile",
    "corpus.completed": "corpus",
    "capacity.selected": "capacity",
    "training.completed": "training",
    "bench.completed": "bench",
    "gate.decided": "gate",
}
FAILED_EVENTS: dict[str, str] = {f"{step}.failed": step for step in EVIDENCE_STEPS} | {"capacity.unavailable": "capacity"}
# Identity fields that describe the measurement; `trial` names which one it is.
# trial and trial_count name a trial within its arm, they do not describe what was measured; in sequential
# rounds trial_count grows with the rounds (3, 3, 3, 4), and the count check below reads its largest value.
_DESCRIBING_FIELDS = tuple(name for name in TrialIdentity.model_fields if name not in ("trial", "trial_count", "version"))


@dataclass(frozen=True)
class LoadedTrial:
    """A parsed trial and where it lies in the bundle."""

    path: str  # relative to the run folder
    sha256: str
    trial: Trial


def read_campaign(bundle: BundleStore, run_id: str, *, extra_events: Sequence[Mapping[str, Any]] = ()) -> CampaignData:
    """The run's campaign. `extra_events` are events in hand that the journal may not have appended yet
    (the gate.decided a service is reacting to)."""
    if not bundle.exists(run_id):
        raise ReportInputError(f"no bundle for run {run_id} under {bundle.root}: check the run ID and SPECDEC_BUNDLE_ROOT")
    problems: list[str] = []
    campaign = _read_model(bundle, run_id, layout.CAMPAIGN, Campaign, problems)
    decision = _read_model(bundle, run_id, layout.DECISION, Decision, problems)
    decision_sha = bundle.ref(run_id, layout.DECISION).sha256 if decision is not None else None
    plan = _read_json(bundle, run_id, layout.BENCH_PLAN, problems)
    loaded = _read_trials(bundle, run_id, problems)
    loaded, rejected = split_rejected(loaded, campaign.target.max_model_len if campaign is not None else None)
    rejected = [*_read_rejected(bundle, run_id, problems), *rejected]
    if not loaded and plan is None:
        raise ReportInputError(
            f"run {run_id} has no trial results ({layout.trial_result('<cell>', '<n>', '<k>')}) and no bench plan in its "
            "bundle: run the bench step first (specdec request bench RUN_ID)"
        )
    scan = bundle.scan_events(run_id)
    if scan.bad_lines:
        problems.append(f"{layout.EVENTS} has {len(scan.bad_lines)} unreadable line(s): {scan.bad_lines[:5]}")
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
        engine=_read_engine(bundle, run_id, plan if isinstance(plan, dict) else None, loaded, problems),
        redaction=_read_redaction(bundle, run_id, problems),
        ngram_advice=advice, ngram_advice_note=advice_note, draft_cost=cost, draft_cost_note=cost_note,
        suffix_prediction=suffix, suffix_prediction_note=suffix_note,
        offline_acceptance=offline, offline_acceptance_note=offline_note, training_output_dir=output_dir,
        target_build=build, target_build_note=build_note,
        canonical=read_canonical(bundle, run_id, problems), intent=read_intent(bundle, run_id, problems),
        reviews=plan_reviews(events, campaign),
    )


def _read_redaction(bundle: BundleStore, run_id: str, problems: list[str]) -> Any:
    """The corpus manifest's redaction block; None when the run built no corpus (named shapes)."""
    try:
        bundle.ref(run_id, layout.CORPUS_MANIFEST)
    except ArtifactMissing:
        return None
    manifest = _read_model(bundle, run_id, layout.CORPUS_MANIFEST, CorpusManifest, problems)
    return manifest.redaction if manifest is not None else None


def _draft_origin(
    bundle: BundleStore, run_id: str, events: Sequence[Mapping[str, Any]], problems: list[str]
) -> tuple[str | None, str | None]:
    """(the run whose draft was reused, the training input key), each None when the run does not say."""
    training = [e for e in events if e.get("schema") == "training.completed"]
    reused = training[-1].get("reused_from") if training else None
    # The trainer-proxy's own record model: an invalid record is a problem, and its key is not shown.
    record = _read_model(bundle, run_id, layout.TRAINING_INPUT_KEY, KeyRecord, problems)
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


def split_rejected(
    loaded: Sequence[LoadedTrial], max_model_len: int | None
) -> tuple[list[LoadedTrial], list[RejectedTrial]]:
    """The trials that pass the spec-decode rule, and those the report's re-check rejects."""
    kept, rejected = [], []
    for item in loaded:
        reasons = recheck(item.trial, max_model_len)
        if not reasons:
            kept.append(item)
            continue
        ident = item.trial.identity
        rejected.append(RejectedTrial(
            path=item.path, cell_id=_cell_of(item), concurrency=item.trial.concurrency,
            trial=ident.trial if ident else None, by="report", reasons=reasons,
        ))
    return kept, rejected


def build_arms(
    loaded: Sequence[LoadedTrial], *, plan: Mapping[str, Any] | None, campaign: Campaign | None,
    rejected: Sequence[RejectedTrial] = (),
) -> list[ArmLevel]:
    """Group trials by cell and concurrency; add declared levels that have no results.

    `rejected` trials are in no arm; an arm only says how many of its declared trials they are."""
    declared = _declared(plan, campaign)
    groups: dict[tuple[str, int | None], list[LoadedTrial]] = {}
    for item in loaded:
        groups.setdefault((_cell_of(item), _concurrency_of(item)), []).append(item)
    for (cell, _role, _trials, levels) in declared.values():
        for level in levels:
            groups.setdefault((cell, level), [])
    standing = {cell for cell, role, _, _ in declared.values() if role == "standing"}
    standing |= {i.trial.identity.cell_id for i in loaded if i.trial.identity and i.trial.identity.role == "standing"}
    measured_cells = {cell for (cell, _), items in groups.items() if items}
    set_aside: dict[tuple[str | None, int | None], int] = {}
    for r in rejected:
        set_aside[(r.cell_id, r.concurrency)] = set_aside.get((r.cell_id, r.concurrency), 0) + 1
    arms = [
        _arm(cell, level, items, declared.get(cell), standing, measured_cells, set_aside.get((cell, level), 0))
        for (cell, level), items in groups.items()
    ]
    return sorted(arms, key=lambda a: (a.role != "standing", a.cell_id, a.concurrency is None, a.concurrency or 0))


def _arm(
    cell: str,
    level: int | None,
    items: list[LoadedTrial],
    declared: tuple[str, str | None, int, list[int]] | None,
    standing: set[str],
    measured_cells: set[str],
    rejected: int = 0,
) -> ArmLevel:
    items = sorted(items, key=lambda i: (_trial_index(i) is None, _trial_index(i) or 0, i.path))
    identities = [i.trial.identity for i in items if i.trial.identity is not None]
    ident = identities[0] if identities else None
    role = ident.role if ident else (declared[1] if declared else None)
    baseline = ident.baseline_cell_id if ident else None
    if baseline is None and role == "candidate" and len(standing) == 1:
        baseline = next(iter(standing))
    problems: list[str] = []
    bare = [i.path for i in items if i.trial.identity is None]
    if bare:
        problems.append(f"{len(bare)} trial file(s) carry no identity block (e.g. {bare[0]})")
    if role is None:
        problems.append("role unknown: neither an identity block nor the plan names this cell standing or candidate")
    if ident is not None and ident.source_revision is None:
        problems.append("source revision unknown (identity.source_revision is null)")
    varying = sorted({f for other in identities[1:] for f in _DESCRIBING_FIELDS if getattr(other, f) != getattr(ident, f)})
    if varying:
        problems.append(f"identity differs between trials in: {', '.join(varying)}")
    if role == "candidate" and baseline is None:
        problems.append("no named baseline: the candidate's identity names no standing cell")
    elif role == "candidate" and baseline not in measured_cells:
        problems.append(f"named baseline {baseline} has no results in this run")
    counts = {i.trial_count for i in identities} | ({declared[2]} if declared and declared[2] > 0 else set())
    trials_declared = max(counts) if counts else None
    if trials_declared is not None and len(items) < trials_declared:
        note = f" ({rejected} rejected: see Rejected trials)" if rejected else ""
        problems.append(f"{len(items)} of {trials_declared} declared trial(s) have results{note}")
    return ArmLevel(
        key=arm_key(cell, level),
        cell_id=cell,
        role=role,  # type: ignore[arg-type]
        concurrency=level,
        baseline_cell_id=baseline,
        identity=ident,
        trials=[_figures(i) for i in items],
        trials_declared=trials_declared,
        identity_problems=problems,
    )


def _figures(item: LoadedTrial) -> TrialFigures:
    trial = item.trial
    median = {m: trial_value(trial, MetricKey(m, "median")) for m in ("ttft", "tpot", "itl", "e2el")}
    return TrialFigures(
        trial=_trial_index(item),
        path=item.path,
        sha256=item.sha256,
        completed=trial.completed,
        failed=trial.failed,
        ttft_ms=median["ttft"],
        tpot_ms=median["tpot"],
        itl_ms=median["itl"],
        e2el_ms=median["e2el"],
        output_throughput_tok_per_s=trial_value(trial, MetricKey("output_throughput", None)),
        spec_decode=trial.spec_decode,
        accuracy=trial.accuracy,
        identity=trial.identity,
    )


def _declared(plan: Mapping[str, Any] | None, campaign: Campaign | None) -> dict[str, tuple[str, str | None, int, list[int]]]:
    """cell -> (cell, role, trials, concurrency levels) from the bench plan, else the campaign's inline matrix."""
    out: dict[str, tuple[str, str | None, int, list[int]]] = {}
    cells: list[Any] = []
    if plan and isinstance(plan.get("cells"), list):
        cells = [c for c in plan["cells"] if isinstance(c, dict)]
    elif campaign is not None and isinstance(campaign.matrix, Matrix):
        cells = [c.model_dump() for c in campaign.matrix.cells]
    for cell in cells:
        cell_id, levels = cell.get("cell_id"), cell.get("concurrency")
        if isinstance(cell_id, str) and isinstance(levels, list):
            trials = cell.get("trials") if isinstance(cell.get("trials"), int) else 0
            out[cell_id] = (cell_id, cell.get("role"), trials, [int(v) for v in levels if isinstance(v, int)])
    return out


def _cell_of(item: LoadedTrial) -> str:
    if item.trial.identity is not None:
        return item.trial.identity.cell_id
    return item.path.split("/")[1]  # contracts.layout.trial_result: bench/<cell_id>/trial-<n>/...


def _concurrency_of(item: LoadedTrial) -> int | None:
    if item.trial.concurrency is not None:
        return item.trial.concurrency
    match = _RESULT_RE.match(item.path.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def _trial_index(item: LoadedTrial) -> int | None:
    if item.trial.identity is not None:
        return item.trial.identity.trial
    match = _TRIAL_DIR_RE.match(item.path.split("/")[2])
    return int(match.group(1)) if match else None


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


def _read_model(bundle: BundleStore, run_id: str, relpath: str, model: type, problems: list[str]) -> Any:
    raw = _read_json(bundle, run_id, relpath, problems)
    if raw is None:
        return None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]["msg"]
        problems.append(f"{relpath} is not a valid {model.__name__}: {exc.error_count()} error(s), first: {first}")
        return None


def _read_trials(bundle: BundleStore, run_id: str, problems: list[str]) -> list[LoadedTrial]:
    run_dir = bundle.run_dir(run_id)
    loaded = []
    for path in result_files(bundle, run_id):
        relpath = path.relative_to(run_dir).as_posix()
        try:
            data = bundle.read_bytes(run_id, relpath)
            trial = parse_trial(orjson.loads(data), source=relpath)
        except (BundleError, orjson.JSONDecodeError, ValueError) as exc:
            problems.append(f"{relpath}: unreadable trial result ({exc})")
            continue
        loaded.append(LoadedTrial(path=relpath, sha256=bundle.ref(run_id, relpath).sha256, trial=trial))
    return loaded


def _read_rejected(bundle: BundleStore, run_id: str, problems: list[str]) -> list[RejectedTrial]:
    """The bench's rejected trials, with the reasons it recorded; read only to be listed."""
    run_dir = bundle.run_dir(run_id)
    out = []
    for path in rejected_files(bundle, run_id):
        relpath = path.relative_to(run_dir).as_posix()
        try:
            raw = orjson.loads(bundle.read_bytes(run_id, relpath))
        except (BundleError, orjson.JSONDecodeError) as exc:
            problems.append(f"{relpath}: unreadable rejected trial ({exc})")
            raw = {}
        reasons = raw.get("speculation_problems") if isinstance(raw, dict) else None
        try:
            trial = parse_trial(raw, source=relpath)
        except ValueError:
            trial = None
        parts = relpath.split("/")  # contracts.layout.rejected_result: bench/<cell_id>/trial-<n>/rejected-c<k>.json
        index = _TRIAL_DIR_RE.match(parts[2]) if len(parts) > 2 else None
        level = _REJECTED_RE.match(parts[-1])
        ident = trial.identity if trial is not None else None
        out.append(RejectedTrial(
            path=relpath,
            cell_id=ident.cell_id if ident else (parts[1] if len(parts) > 1 and KEY_RE.match(parts[1]) else None),
            concurrency=trial.concurrency if trial is not None and trial.concurrency is not None
            else (int(level.group(1)) if level else None),
            trial=ident.trial if ident else (int(index.group(1)) if index else None),
            by="bench",
            reasons=[str(r) for r in reasons] if isinstance(reasons, list) and reasons else ["no reason recorded"],
        ))
    return out


def _read_engine(
    bundle: BundleStore, run_id: str, plan: Mapping[str, Any] | None, loaded: Sequence[LoadedTrial], problems: list[str]
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
        first, later = layout.engine_check(folder), layout.engine_check(layout.attempt_folder(folder, "*"))  # type: ignore[arg-type]
        # The first attempt's, then later attempts' in order (attempt_folder).
        mine = sorted((p for p in found if p == first or fnmatch.fnmatch(p, later)),
                      key=lambda p: (p != first, len(p), p))
        used |= set(mine)
        rows += [_engine_row(bundle, run_id, p, cell, index, problems) for p in mine] or [
            LaunchEngine(cell_id=cell, launch=index, path=None, check=None)]
    for relpath in found:
        cell = relpath.split("/")[1]  # contracts.layout.launch_folder: bench/<cell_id>/launch-<i>
        if relpath not in used and KEY_RE.match(cell):
            rows.append(_engine_row(bundle, run_id, relpath, cell, None, problems))
    served = {row.cell_id for row in rows}
    for cell in sorted({_cell_of(item) for item in loaded} - served):
        rows.append(LaunchEngine(cell_id=cell, launch=None, path=None, check=None))
    return rows


def _engine_row(
    bundle: BundleStore, run_id: str, relpath: str, cell: str, index: int | None, problems: list[str]
) -> LaunchEngine:
    check = _read_model(bundle, run_id, relpath, EngineCheck, problems)
    if check is not None:
        cell, index = check.cell_id, check.launch if index is None else index
    return LaunchEngine(cell_id=cell, launch=index, path=relpath, check=check)
