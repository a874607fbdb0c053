"""Data checks of one comparison: what makes a level inconclusive before any statistics.

Each check returns reasons in words; an empty list means the check passed.
Pure functions over `Trial`s. Before any of them, `recheck` sets aside every
trial whose spec-decode counters contradict its declared speculation
(contracts/artifacts/speculation.py, the rule the bench applied): such a trial is never
counted, and the level it belongs to is inconclusive.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass

from contracts.artifacts.decision import ArmCounts, FloorCheck
from contracts.artifacts.results import COMPARED_IDENTITY_FIELDS, MAX_FAILED_SHARE
from contracts.artifacts.trials import Trial
from services.shared import results

NODE = "node"  # the identity field node_problems checks


def trial_order(trial: Trial) -> tuple[int, str]:
    return (trial.identity.trial if trial.identity else 0, trial.source)


def arm_counts(trials: list[Trial]) -> ArmCounts:
    completed = sum(t.completed for t in trials)
    failed = sum(t.failed for t in trials)
    total = completed + failed
    return ArmCounts(
        trials=len(trials),
        completed_requests=completed,
        failed_requests=failed,
        failed_share=failed / total if total else 0.0,
        files=[t.source for t in trials],
    )


def count_problems(arm: str, counts: ArmCounts, min_trials: int) -> list[str]:
    problems = []
    if counts.trials < min_trials:
        problems.append(
            f"too few trials: the {arm} has {counts.trials} at this level, the gate needs at least {min_trials} "
            "per arm to tell a difference from trial-to-trial noise"
        )
    elif counts.completed_requests == 0:
        problems.append(f"the {arm}'s trials completed no request")
    if counts.failed_share > MAX_FAILED_SHARE:
        problems.append(
            f"the {arm} failed {counts.failed_requests} of {counts.completed_requests + counts.failed_requests} "
            f"requests ({counts.failed_share:.1%}), above the {MAX_FAILED_SHARE:.0%} the gate accepts: "
            "latencies of the requests that succeeded are not the latencies of the load"
        )
    return problems


def arm_problems(arm: str, trials: list[Trial], rejected: Collection[int] = ()) -> list[str]:
    """Consistency of one arm's trials at one level: one cell, every declared trial, no duplicates.

    `rejected`: trial indices that were measured but rejected (rejected_problems names them)."""
    with_identity = [t for t in trials if t.identity is not None]
    if not with_identity:
        return []
    if len(with_identity) != len(trials):
        return [f"the {arm} mixes files with and without specdec's identity block: check the file pattern"]
    problems = []
    described = {(t.identity.cell_id, str(t.identity.compared())) for t in with_identity}  # type: ignore[union-attr]  # with_identity: no None
    if len(described) > 1:
        cells = sorted({cell for cell, _ in described})
        problems.append(f"the {arm}'s trials at this level describe different measurements (cells {', '.join(cells)})")
    indices = Counter(t.identity.trial for t in with_identity)  # type: ignore[union-attr]  # with_identity: no None
    duplicates = sorted(i for i, n in indices.items() if n > 1)
    if duplicates:
        problems.append(f"the {arm} has several files for trial(s) {duplicates}: one file per trial")
    declared = max(t.identity.trial_count for t in with_identity)  # type: ignore[union-attr]  # with_identity: no None
    missing = sorted(set(range(declared)) - set(indices) - set(rejected))
    if missing:
        problems.append(
            f"the {arm} declared {declared} trials but trial(s) {missing} are missing: "
            "a missing trial may be the bad one, so the rest cannot stand for the cell"
        )
    return problems


def identity_problems(base: list[Trial], cand: list[Trial]) -> tuple[list[str], list[str]]:
    """Differences between the arms in anything but the serving config, and the fields left unchecked."""
    problems: list[str] = []
    base_ids = [t.identity for t in base if t.identity is not None]
    cand_ids = [t.identity for t in cand if t.identity is not None]
    base_models = {t.model_id for t in base if t.model_id}
    cand_models = {t.model_id for t in cand if t.model_id}
    if base_models and cand_models and base_models != cand_models:
        problems.append(
            f"the arms served different models: baseline {sorted(base_models)}, candidate {sorted(cand_models)}"
        )
    if not (base_ids and cand_ids):
        # Without identity only the concurrency (grouping by max_concurrency) and
        # vLLM's model_id can be compared.
        unchecked = [
            f
            for f in COMPARED_IDENTITY_FIELDS
            if f != "concurrency" and not (f == "model" and base_models and cand_models)
        ]
        return problems, [*unchecked, NODE]
    b, c = base_ids[0], cand_ids[0]
    b_fields, c_fields = b.compared(), c.compared()
    for name in COMPARED_IDENTITY_FIELDS:
        if b_fields[name] != c_fields[name]:
            problems.append(
                f"identity differs between the arms in {name}: baseline {b_fields[name]!r}, candidate "
                f"{c_fields[name]!r}; "
                "only the serving config may differ"
            )
    if b.role != "standing":
        problems.append(f"the baseline files are cell {b.cell_id}, a {b.role} cell, not the standing cell")
    if c.role != "candidate":
        problems.append(f"the candidate files are cell {c.cell_id}, a {c.role} cell, not a candidate")
    elif c.baseline_cell_id != b.cell_id:
        problems.append(f"candidate {c.cell_id} was measured against baseline {c.baseline_cell_id}, not {b.cell_id}")
    node, unchecked = node_problems(base, cand)
    return problems + node, unchecked


def node_problems(base: list[Trial], cand: list[Trial]) -> tuple[list[str], list[str]]:
    """Every trial of both arms must have run on one node; the problems, and ["node"] when it is unknown.

    Its own check rather than a COMPARED_IDENTITY_FIELDS entry: it reads every trial
    (not one per arm), names each node with the trials that ran there, and a file
    written before the node entered the identity (node None in every trial) leaves it
    unchecked rather than different."""
    ran: dict[str | None, list[str]] = {}
    for arm, trials in (("baseline", base), ("candidate", cand)):
        for t in trials:
            if t.identity is not None:
                ran.setdefault(t.identity.node, []).append(f"{arm} trial {t.identity.trial}")
    if not ran:
        return [], [NODE]
    if set(ran) == {None}:
        return [], [NODE]
    if len(ran) == 1:
        return [], []
    where = "; ".join(f"{'unknown node' if node is None else f'node {node}'}: {', '.join(trials)}"
                      for node, trials in sorted(ran.items(), key=lambda item: (item[0] is None, item[0] or "")))
    return [f"the trials compared at this level did not all run on one node ({where}): a comparison across nodes "
            "confounds the speculative config with the machine; measure both arms on one node (the bench plan "
            "serves every cell on the same node)"], []


@dataclass(frozen=True)
class Rejected:
    """A trial the gate does not count, and why: the bench rejected it, or the gate's re-check did."""

    source: str
    trial: Trial | None  # None when a rejected file cannot even be read
    reasons: tuple[str, ...]
    by: str  # "the bench" or "the gate's re-check"

    @property
    def index(self) -> int | None:
        return self.trial.identity.trial if self.trial is not None and self.trial.identity else None

    @property
    def concurrency(self) -> int | None:
        return self.trial.concurrency if self.trial is not None else None

    def describe(self) -> str:
        ident = self.trial.identity if self.trial is not None else None
        what = (f"cell {ident.cell_id} trial {ident.trial} at concurrency {ident.concurrency}" if ident
                else self.source)
        return f"{what} (rejected by {self.by}: {'; '.join(self.reasons)})"


def recheck(trials: list[Trial], max_model_len: int | None) -> tuple[list[Trial], list[Rejected]]:
    """The trials that pass the spec-decode rule, and those that do not
    (docs/design.md#principle-1-no-inert-configuration).

    The bench applied the same rule (contracts/artifacts/speculation.py) before writing each
    result; applying it again here means a hand-edited or older file, whose counters
    contradict the speculation its identity declares, is never counted. A file
    without specdec's identity declares nothing to check against and passes."""
    counted: list[Trial] = []
    rejected: list[Rejected] = []
    for t in trials:
        problems = results.recheck(t, max_model_len)
        if problems:
            rejected.append(Rejected(source=t.source, trial=t, reasons=tuple(problems), by="the gate's re-check"))
        else:
            counted.append(t)
    return counted, rejected


def rejected_problems(arm: str, rejected: list[Rejected]) -> list[str]:
    """One reason per rejected trial of an arm at a level: a rejected trial may be the telling one,
    so the level cannot be decided on the others alone."""
    return [
        f"the {arm}'s trial {r.index if r.index is not None else '?'} was rejected by {r.by} and is not counted: "
        f"{'; '.join(r.reasons)} ({r.source})"
        for r in rejected
    ]


def floor_checks(
    cand: list[Trial],
    *,
    acceptance_floor: float | None,
    acceptance_length_floor: float | None,
    accuracy_floor: float | None,
    accuracy: float | None,
) -> tuple[list[FloorCheck], list[str]]:
    """The candidate's floors, pooled over its trials at this level; reasons when a floor has nothing to read.

    A candidate whose every trial's identity declares no speculative config (a serving change alone, or the
    standing config served again in an A/A check) has no acceptance to floor: its acceptance floors are shown
    as not applicable, never as a data problem. Trials without identity (plain result files) cannot say, so
    their floors are read as before."""
    checks: list[FloorCheck] = []
    problems: list[str] = []
    if cand and all(t.identity is not None and t.identity.serving_config.speculative is None for t in cand):
        for name, minimum in (("acceptance_rate", acceptance_floor), ("acceptance_length", acceptance_length_floor)):
            if minimum is not None:
                checks.append(FloorCheck(
                    floor=name, minimum=minimum, measured=None, passed=None,
                    source="not applicable: the candidate's identity declares no speculative config"))
        acceptance_floor = acceptance_length_floor = None
    counted = [t.spec_decode for t in cand if t.spec_decode is not None and t.spec_decode.num_draft_tokens > 0]
    complete = bool(cand) and len(counted) == len(cand)
    drafts = sum(sd.num_drafts for sd in counted)
    draft_tokens = sum(sd.num_draft_tokens for sd in counted)
    accepted = sum(sd.num_accepted_tokens for sd in counted)
    source = f"spec-decode counters pooled over {len(counted)} trial(s)"
    for name, minimum, measured in (
        ("acceptance_rate", acceptance_floor, accepted / draft_tokens if complete else None),
        ("acceptance_length", acceptance_length_floor, 1 + accepted / drafts if complete and drafts else None),
    ):
        if minimum is None:
            continue
        if measured is None:
            problems.append(
                f"no spec-decode counters for the {name} floor to read in {len(cand) - len(counted)} of "
                f"{len(cand)} candidate trial(s): the engine drafted nothing or the files lack the counters"
            )
        checks.append(_floor(name, minimum, measured, source))
    if accuracy_floor is not None:
        if accuracy is None:
            problems.append("no evaluation block (accuracy or agreement_rate) for the accuracy floor to read")
        checks.append(_floor("accuracy", accuracy_floor, accuracy, "mean of the candidate's evaluation blocks"))
    return checks, problems


def _floor(name: str, minimum: float, measured: float | None, source: str) -> FloorCheck:
    return FloorCheck(
        floor=name,
        minimum=minimum,
        measured=measured,
        passed=None if measured is None else measured >= minimum,
        source=source,
    )
