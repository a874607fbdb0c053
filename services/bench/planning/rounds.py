"""Sequential rounds: the bench-runner's round controller (campaign gate.max_trials).

After each block from `min_trials` on, `RoundController.stop_after` looks at what is recorded with the
gate's own rule (services/shared/sequential.py; a step never imports another step) and stops the rotation
when no level is open, or at the cap. It may run a round the gate would not have needed, never one fewer
(docs/gate.md, "The bench-runner's rounds"); each look is bench/rounds/look-<n>.json."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np
import orjson

from contracts import layout
from contracts.artifacts.trials import DEFAULT_STATISTIC, LATENCY_METRICS, MetricKey, Trial, parse_trial, trial_value
from contracts.campaign import Campaign, Matrix
from contracts.envelope import ArtifactRef
from contracts.errors import SpecdecError
from services.bench.planning.model import BenchPlan
from services.runtime.bundle.bundle import BundleStore
from services.shared import sequential

LOOKS_DIR = layout.BENCH_ROUNDS_DIR


def look_path(trials: int) -> str:
    return f"{LOOKS_DIR}/look-{trials}.json"


def metric_key(text: str) -> MetricKey:
    """`tpot:p99` -> MetricKey, as the gate reads it (GateSpec validated the text; a test keeps this
    equal to services/gate/metrics.parse_metric)."""
    metric, _, stat = text.partition(":")
    if metric not in LATENCY_METRICS:
        return MetricKey(metric, None)
    stat = stat or DEFAULT_STATISTIC
    if stat.startswith("p"):
        p = float(stat[1:])
        stat = "p" + (str(int(p)) if p == int(p) else str(p))
    return MetricKey(metric, stat)


def _figures(trials: Iterable[Trial], key: MetricKey) -> list[float] | None:
    """The trials' figures in trial order; None when one lacks it or it is not positive (no ratio)."""
    values = [trial_value(t, key) for t in sorted(trials, key=lambda t: t.identity.trial if t.identity else 0)]
    if any(v is None or not np.isfinite(v) or v <= 0 for v in values):
        return None
    return [float(v) for v in values]  # type: ignore[arg-type]  # no None left (returned above)


class RoundController:
    """Decides after each block whether the rounds go on; stateless over the recorded results."""

    def __init__(self, plan: BenchPlan, bundle: BundleStore) -> None:
        assert plan.rounds is not None
        self.plan = plan
        self.rounds = plan.rounds
        self.bundle = bundle
        self.objective = metric_key(self.rounds.objective)
        self.guards = [metric_key(g) for g in self.rounds.guards]
        self.standing = next(cell for cell in plan.cells if cell.role == "standing")
        self.candidates = [cell for cell in plan.cells if cell.role == "candidate"]
        self.looks: list[dict[str, Any]] = []

    def stop_after(self, index: int, results: list[ArtifactRef], failed: dict[str, str]) -> bool:
        """After block `index` (index + 1 trials per arm): True when the rounds stop there."""
        n = index + 1
        if n < self.rounds.min_trials:
            return False
        levels = [] if self.standing.cell_id in failed else self.look(n, results, failed)
        # A failed standing cell fails the step (nothing to compare with): no round after it pays.
        still_open = [lvl for lvl in levels if lvl["open"]]
        at_cap = n >= self.rounds.max_trials
        stopped = "cap" if at_cap and still_open else ("decided" if not still_open else None)
        record = {"trials_per_arm": n, "max_trials": self.rounds.max_trials, "stopped": stopped, "levels": levels}
        self.looks.append(record)
        try:
            self.bundle.write_json(self.plan.run_id, look_path(n), record)
        except SpecdecError:
            pass  # an earlier attempt stored this look already (with the figures of its own moment)
        return stopped is not None

    def look(self, n: int, results: list[ArtifactRef], failed: dict[str, str]) -> list[dict[str, Any]]:
        """Every candidate level's look at n trials per arm, on the results recorded so far."""
        by_level: dict[tuple[str, int], list[Trial]] = defaultdict(list)
        for ref in results:
            trial = parse_trial(orjson.loads(self.bundle.resolve(ref.uri).read_bytes()), source=ref.uri)
            if trial.identity is not None:
                by_level[(trial.identity.cell_id, trial.identity.concurrency)].append(trial)
        levels = []
        for cell in self.candidates:
            if cell.cell_id in failed:
                continue  # measured no more: the gate decides it on what it has
            for level in cell.concurrency:
                levels.append(self._level(cell.cell_id, level, by_level[(self.standing.cell_id, level)],
                                          by_level[(cell.cell_id, level)]))
        return levels

    def _level(self, cell_id: str, level: int, base: list[Trial], cand: list[Trial]) -> dict[str, Any]:
        row: dict[str, Any] = {"candidate": cell_id, "concurrency": level, "trials": [len(base), len(cand)]}
        seen = {}
        for key in [self.objective, *self.guards]:
            b, c = _figures(base, key), _figures(cand, key)
            if b is None or c is None or min(len(b), len(c)) < sequential.MIN_LOOK_TRIALS:
                row.update(open=False, why=f"{key.name} cannot be compared (a figure is missing or zero): "
                                           "the gate's data problem, which more trials do not mend")
                return row
            seen[key] = sequential.look(
                np.array(b), np.array(c), higher_is_better=key.higher_is_better, alpha=self.rounds.alpha_per_side,
                min_effect=self.rounds.min_effect_pct / 100, first=self.rounds.min_trials, cap=self.rounds.max_trials,
                bias=self.rounds.server_bias_pct / 100)
        objective = seen[self.objective]
        verdict = sequential.VERDICT_NAMES[int(objective.verdict)]
        # The pilot's figure (round 1 is the first look): the trials per arm the minimum effect needs at
        # the spread measured so far, both arms pooled (sequential.trials_for_min_effect).
        spread = sequential.pooled_spread([_figures(base, self.objective) or [], _figures(cand, self.objective) or []])
        expected = None if spread is None else sequential.trials_for_min_effect(
            spread, alpha=self.rounds.alpha_per_side, min_effect=self.rounds.min_effect_pct / 100,
            first=self.rounds.min_trials, cap=self.rounds.max_trials, bias=self.rounds.server_bias_pct / 100)
        worse_guards = [key.name for key in self.guards if int(seen[key].verdict) == sequential.WORSE]
        row.update(
            objective=self.objective.name, verdict=verdict,
            change_pct=round(100 * float(np.expm1(objective.estimate)), 4),
            interval_pct=[round(100 * float(np.expm1(objective.low)), 4),
                          round(100 * float(np.expm1(objective.high)), 4)],
            worse_guards=worse_guards,
            open=verdict == "undecided" and not worse_guards,
            cv_pct=None if spread is None else round(100 * spread, 3),
            expected_trials_per_arm=expected,
        )
        return row


def earlier_noise(
    bundle: BundleStore, campaign: Campaign, matrix: Matrix, run_id: str,
) -> dict[int, tuple[list[list[float]], list[str]]]:
    """Per concurrency level: the objective's per-trial figures of every arm of earlier runs of the same
    target and hardware (identity model and hardware of the standing cell), and those runs' IDs.

    Read from their bench results (the gate's files); a run that cannot be read is passed over."""
    assert campaign.gate.objective is not None
    standing = next(cell for cell in matrix.cells if cell.role == "standing")
    model = standing.serving.model or campaign.target.checkpoint
    hardware = standing.hardware
    key = metric_key(campaign.gate.objective)
    arms: dict[tuple[str, str, int], list[tuple[int, float]]] = defaultdict(list)
    for other in bundle.list_runs():
        if other == run_id:
            continue
        for path in sorted(bundle.run_dir(other).glob(layout.RESULTS_GLOB)):
            try:
                trial = parse_trial(orjson.loads(path.read_bytes()), source=str(path))
            except (OSError, ValueError, SpecdecError):
                continue
            ident = trial.identity
            value = trial_value(trial, key)
            if ident is None or ident.model != model or ident.hardware != hardware or value is None or value <= 0:
                continue
            arms[(other, ident.cell_id, ident.concurrency)].append((ident.trial, float(value)))
    out: dict[int, tuple[list[list[float]], list[str]]] = {}
    for (other, _, level), values in sorted(arms.items()):
        groups, runs = out.setdefault(level, ([], []))
        groups.append([v for _, v in sorted(values)])
        if other not in runs:
            runs.append(other)
    return out
