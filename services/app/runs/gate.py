"""The gate's decision, offline: over a run's bundle (`decide_run`) or over trial result files (`decide_files`).

The gate's own `decide` (services/gate), as the gate service applies it; nothing is written.
"""

from __future__ import annotations

import glob
from pathlib import Path

from contracts.artifacts.decision import Decision
from contracts.artifacts.trials import Trial
from contracts.campaign import GateSpec
from contracts.envelope import KEY_RE
from services.gate import GateInputError, decide, load_trials, split_by_role
from services.gate.results import load_rejected
from services.runtime.bundle.bundle import BundleStore
from services.runtime.campaign import load_campaign
from services.runtime.errors import ConfigurationError
from services.shared.results import rejected_files, result_files


def decide_run(bundle: BundleStore, run_id: str, spec: GateSpec | None) -> Decision:
    """What the gate decides over every trial result in the run's bundle, with `spec` or the campaign's gate;
    the rejected trials are named, never counted (as the gate service reads them)."""
    campaign = load_campaign(bundle, run_id)
    paths = result_files(bundle, run_id)
    if not paths:
        raise ConfigurationError(f"run {run_id} has no trial results in its bundle to gate: the bench writes them "
                                 f"(campaign_status shows where the run is)")
    baseline, candidates = split_by_role(load_trials(paths))
    rejected = load_rejected(rejected_files(bundle, run_id))
    for r in rejected:
        ident = r.trial.identity if r.trial is not None else None
        if ident is not None and ident.role == "candidate":
            candidates.setdefault(ident.cell_id, [])  # decided, on its counted trials (perhaps none)
    return decide(baseline, candidates, spec or campaign.gate, max_model_len=campaign.target.max_model_len,
                  rejected=rejected)


def decide_files(
    baseline: list[str], candidates: list[str], spec: GateSpec, *, max_trials: int | None = None
) -> Decision:
    """The decision over result files: `baseline` globs (the standing cell's trials) against `candidates`,
    each `[NAME=]GLOB`; without NAME, files are grouped by their identity's cell_id, else named candidate,
    candidate-2, ... GateInputError names what cannot be read or is given twice. `max_trials`: the cap of
    sequential rounds (the decision may then be `continue`); None: the trials at hand are the cap."""
    baseline_paths = [p for pattern in baseline for p in _expand(pattern)]
    candidate_specs = [(*_split_name(text), text) for text in candidates]
    candidate_paths = {text: _expand(pattern) for _, pattern, text in candidate_specs}
    shared = set(baseline_paths) & {p for paths in candidate_paths.values() for p in paths}
    if shared:
        raise GateInputError(f"file(s) match both the baseline and a candidate: {sorted(map(str, shared))}")
    trials = load_trials([*baseline_paths, *(p for paths in candidate_paths.values() for p in paths)])
    base, rest = trials[: len(baseline_paths)], trials[len(baseline_paths):]
    groups: dict[str, list[Trial]] = {}
    for index, (name, _, text) in enumerate(candidate_specs):
        group, rest = rest[: len(candidate_paths[text])], rest[len(candidate_paths[text]):]
        for key, group_trials in _name_groups(name, group, index).items():
            if key in groups:
                raise GateInputError(f"candidate {key!r} is given twice: name each --candidate NAME=GLOB")
            groups[key] = group_trials
    return decide(base, groups, spec, max_trials=max_trials)


def _expand(pattern: str) -> list[Path]:
    matches = sorted(glob.glob(pattern, recursive=True))
    if not matches:
        raise GateInputError(f"no file matches {pattern!r}")
    return [Path(m) for m in matches]


def _split_name(text: str) -> tuple[str | None, str]:
    name, sep, pattern = text.partition("=")
    if sep and KEY_RE.match(name):
        return name, pattern
    return None, text


def _name_groups(name: str | None, trials: list[Trial], index: int) -> dict[str, list[Trial]]:
    if name is not None:
        return {name: trials}
    if all(t.cell_id for t in trials):
        groups: dict[str, list[Trial]] = {}
        for t in trials:
            groups.setdefault(t.cell_id, []).append(t)  # type: ignore[arg-type]  # all() above saw each cell_id set
        return groups
    return {"candidate" if index == 0 else f"candidate-{index + 1}": trials}
