"""The bench's trial results: read from the bundle, re-checked, and grouped into arms.

Results are parsed by the gate's own reader, so report and gate read the same figures; a rejected trial
(the bench's, or a result the spec-decode rule rejects on re-check, as the gate does) never reaches an
arm. `read_trials` and `read_rejected` do the I/O, `split_rejected` and `build_arms` are pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from contracts.artifacts.results import TrialIdentity
from contracts.artifacts.trials import MetricKey, Trial, parse_trial, trial_value
from contracts.campaign import Campaign, Matrix
from contracts.envelope import KEY_RE
from services.publisher.report.model import ArmLevel, RejectedTrial, TrialFigures, arm_key
from services.runtime.bundle.bundle import BundleError, BundleStore
from services.shared.results import recheck, rejected_files, result_files

# The parts of a trial result's path (contracts.layout.trial_result) that name
# its trial and concurrency, for files without an identity block.
_TRIAL_DIR_RE = re.compile(r"^trial-([0-9]+)$")
_RESULT_RE = re.compile(r"^result-c([0-9]+)\.json$")
_REJECTED_RE = re.compile(r"^rejected-c([0-9]+)\.json$")

# Identity fields that describe the measurement; `trial` names which one it is.
# trial and trial_count name a trial within its arm, they do not describe what was measured; in sequential
# rounds trial_count grows with the rounds (3, 3, 3, 4), and the count check below reads its largest value.
_DESCRIBING_FIELDS = tuple(name for name in TrialIdentity.model_fields
                           if name not in ("trial", "trial_count", "version"))


@dataclass(frozen=True)
class LoadedTrial:
    """A parsed trial and where it lies in the bundle."""

    path: str  # relative to the run folder
    sha256: str
    trial: Trial


# --- pure builders -------------------------------------------------------------


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
            path=item.path, cell_id=cell_of(item), concurrency=item.trial.concurrency,
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
        groups.setdefault((cell_of(item), _concurrency_of(item)), []).append(item)
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
        _arm(cell, level, items, declared=declared.get(cell), standing=standing, measured_cells=measured_cells,
             rejected=set_aside.get((cell, level), 0))
        for (cell, level), items in groups.items()
    ]
    return sorted(arms, key=lambda a: (a.role != "standing", a.cell_id, a.concurrency is None, a.concurrency or 0))


def _arm(
    cell: str,
    level: int | None,
    items: list[LoadedTrial],
    *,
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
    varying = sorted({f for other in identities[1:] for f in _DESCRIBING_FIELDS
                      if getattr(other, f) != getattr(ident, f)})
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
        role=role,
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


def _declared(
    plan: Mapping[str, Any] | None, campaign: Campaign | None
) -> dict[str, tuple[str, str | None, int, list[int]]]:
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


def cell_of(item: LoadedTrial) -> str:
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


# --- I/O -------------------------------------------------------------------------


def read_trials(bundle: BundleStore, run_id: str, problems: list[str]) -> list[LoadedTrial]:
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


def read_rejected(bundle: BundleStore, run_id: str, problems: list[str]) -> list[RejectedTrial]:
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
