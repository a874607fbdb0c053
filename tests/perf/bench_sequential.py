"""Sequential rounds with known truth: false promotions over all looks, power, and trials spent.

The design the issue fixes: per-trial CV 8 % (lognormal trial figures of TPOT), one
more trial per arm and level each round from 3 up to a cap of 15, minimum effect
1 %, the gate's 95 % family-wise confidence (Bonferroni over the candidates).

Two drivers, both the project's own code:

- **the shared stopping rule** (services/shared/sequential.py, through
  services.gate.stats.compare), vectorised over many campaigns: a round loop that
  stops a campaign at the first look whose interval settles it (better, worse, or
  within +-1 %), else at the cap. One candidate, one level.
- **the gate's decide path** (services.gate.decide with max_trials), on trial
  objects with identity and counters: the same round loop, stopping when the
  decision is no longer `continue`. One candidate x one level (checked against the
  vectorised rule, campaign by campaign), and 2 candidates x 2 levels (every
  arm takes a trial each round until the campaign stops: a decided level is
  looked at again with the later trials, as a stateless gate sees a bundle; the
  bench-runner's round controller, which stops measuring a decided level, is not
  built yet).

A campaign "promotes" when its final decision is promote (for 2 candidates, when it
promotes the candidate that truly gains). Trials per arm: the round the campaign
stopped at. The figures are what was measured; a goal missed is reported as missed.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from contracts.artifacts.trials import Trial, parse_trial
from contracts.campaign import GateSpec, SpeculativeConfig
from services.gate import decide
from services.gate.simulate import identity, spec_counters, trial_result
from services.gate.stats import BETTER, CONFIDENCE, compare
from tests.perf.runner import make_row

TRIAL_CV = 0.08
FIRST, CAP = 3, 15
MIN_EFFECT_PCT = 1.0
SPEC = GateSpec(objective="tpot", acceptance_floor=0.3, min_trials=FIRST, min_effect_pct=MIN_EFFECT_PCT)
FALSE_PROMOTION_GOAL = 0.05
POWER_GOAL = 0.80
TRIALS_GOAL = 5.0
NGRAM = SpeculativeConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_min=2, prompt_lookup_max=4)
SCENARIOS = (("A/A (no change)", 1.0), ("true 10 % gain", 0.9), ("true 10 % loss", 1.1), ("true 25 % gain", 0.75))


def _figures(rng: np.random.Generator, campaigns: int, factor: float, shape: tuple[int, ...] = ()) -> np.ndarray:
    """Per-trial TPOT figures (ms), lognormal with mean factor x 8 ms and CV TRIAL_CV; last axis the trials."""
    sigma = math.sqrt(math.log1p(TRIAL_CV**2))
    return 8.0 * factor * rng.lognormal(-sigma * sigma / 2, sigma, (campaigns, *shape, CAP))


def rounds_vectorised(base: np.ndarray, cand: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The shared rule's round loop: (promoted, trials per arm at the stop) per campaign."""
    campaigns = base.shape[0]
    promoted = np.zeros(campaigns, dtype=bool)
    stopped_at = np.full(campaigns, CAP)
    open_ = np.ones(campaigns, dtype=bool)
    for n in range(FIRST, CAP + 1):
        cmp = compare(base[:, :n], cand[:, :n], higher_is_better=False, alpha=alpha,
                      min_effect=MIN_EFFECT_PCT / 100, first=FIRST, cap=CAP)
        now = open_ & cmp.settled
        promoted |= now & (cmp.verdict == BETTER)
        stopped_at[now] = n
        open_ &= ~now
    return promoted, stopped_at


# --- the gate's decide path ---------------------------------------------------------------------


def _templates(cells: list[str], levels: tuple[int, ...]) -> dict[tuple[str, int, int], list[Trial]]:
    """Trial objects with identity and counters, per (cell, level, n): trials 0..n-1 declaring n trials.
    Each campaign swaps in its own figures (summary), as tests/unit/gate does."""
    rng = np.random.default_rng(0)
    out: dict[tuple[str, int, int], list[Trial]] = {}
    for cell in cells:
        standing = cell == "standing"
        for level in levels:
            for n in range(FIRST, CAP + 1):
                out[(cell, level, n)] = [
                    parse_trial(trial_result(
                        rng, detailed=False, concurrency=level,
                        ident=identity(cell, concurrency=level, trial=i, trial_count=n,
                                       speculative=None if standing else NGRAM,
                                       baseline_cell_id=None if standing else "standing"),
                        counters=None if standing else spec_counters(0.5, 3)), source=f"{cell}/c{level}/{i}")
                    for i in range(n)
                ]
    return out


def _arm(templates: dict[tuple[str, int, int], list[Trial]], cell: str, figures: np.ndarray,
         levels: tuple[int, ...], *, n: int) -> list[Trial]:
    """figures: (levels, CAP) for one campaign's arm."""
    return [replace(t, summary={"median_tpot_ms": float(figures[j, i])})
            for j, level in enumerate(levels) for i, t in enumerate(templates[(cell, level, n)])]


def rounds_decide(templates: dict[tuple[str, int, int], list[Trial]], base: np.ndarray, cands: dict[str, np.ndarray],
                  levels: tuple[int, ...]) -> tuple[list[str | None], np.ndarray]:
    """The gate's round loop: per campaign, the winner (None unless promoted) and the round it stopped at.
    base: (campaigns, levels, CAP); each candidate likewise."""
    winners: list[str | None] = []
    stopped_at = np.zeros(base.shape[0], dtype=int)
    for k in range(base.shape[0]):
        for n in range(FIRST, CAP + 1):
            decision = decide(_arm(templates, "standing", base[k], levels, n=n),
                              {name: _arm(templates, name, fig[k], levels, n=n) for name, fig in cands.items()},
                              SPEC, max_trials=CAP)
            if decision.decision != "continue":
                break
        winners.append(decision.winner)
        stopped_at[k] = n
    return winners, stopped_at


# --- rows -----------------------------------------------------------------------------------------


def _scenario_rows(label: str, factor: float, promoted: np.ndarray, trials: np.ndarray, *, where: str,
                   goals: bool = True) -> list[dict[str, Any]]:
    rate, mean_trials = float(promoted.mean()), float(trials.mean())
    rows = []
    if not goals:  # the targets are for one candidate and one level; the rest is reported
        return [make_row(f"{where}: {label}, promoted", rate, "fraction", goal="reported", passed=None),
                make_row(f"{where}: {label}, trials per arm at the stop (mean)", mean_trials, "trials",
                         goal="reported", passed=None)]
    if factor == 1.0:
        rows.append(make_row(f"{where}: {label}, false promotion over all looks", rate, "fraction",
                             goal=f"<= {FALSE_PROMOTION_GOAL}", passed=rate <= FALSE_PROMOTION_GOAL,
                             reference="false-promotion budget", reference_value=FALSE_PROMOTION_GOAL))
    elif factor == 0.9:
        rows.append(make_row(f"{where}: {label}, promoted", rate, "fraction", goal=f">= {POWER_GOAL}",
                             passed=rate >= POWER_GOAL))
    elif factor > 1:
        rows.append(make_row(f"{where}: {label}, promoted", rate, "fraction", goal="0 (never)", passed=rate == 0))
    else:
        rows.append(make_row(f"{where}: {label}, promoted", rate, "fraction", goal="reported", passed=None))
    goal = f"<= {TRIALS_GOAL}" if factor == 0.75 else "reported"
    rows.append(make_row(f"{where}: {label}, trials per arm at the stop (mean)", mean_trials, "trials",
                         goal=goal, passed=mean_trials <= TRIALS_GOAL if factor == 0.75 else None))
    return rows


def bench(ctx: Any) -> list[dict[str, Any]]:
    campaigns = 2000 if ctx.quick else 20000
    through_decide = 20 if ctx.quick else 200
    many = 10 if ctx.quick else 100
    rng = np.random.default_rng(20261201)
    rows: list[dict[str, Any]] = []
    alpha = 1 - CONFIDENCE
    one = f"shared rule, 1 candidate x 1 level, CV 8 %, cap {CAP}, min effect 1 % ({campaigns} campaigns)"
    for label, factor in SCENARIOS:
        base, cand = _figures(rng, campaigns, 1.0), _figures(rng, campaigns, factor)
        promoted, trials = rounds_vectorised(base, cand, alpha)
        rows += _scenario_rows(label, factor, promoted, trials, where=one)

    # The gate's own decide path on the same design, campaign by campaign against the shared rule.
    templates = _templates(["standing", "ngram"], (1,))
    mismatches = 0
    where = f"gate decide path, 1 candidate x 1 level ({through_decide} campaigns)"
    for label, factor in SCENARIOS:
        base, cand = _figures(rng, through_decide, 1.0, (1,)), _figures(rng, through_decide, factor, (1,))
        winners, trials = rounds_decide(templates, base, {"ngram": cand}, (1,))
        promoted = np.array([w == "ngram" for w in winners])
        expect_promoted, expect_trials = rounds_vectorised(base[:, 0], cand[:, 0], alpha)
        mismatches += int(np.sum(promoted != expect_promoted) + np.sum(trials != expect_trials))
        rows += _scenario_rows(label, factor, promoted, trials, where=where)
    rows.append(make_row("gate decide path vs shared rule: campaigns that differ (outcome or stop round)",
                         float(mismatches), "campaigns", goal="0", passed=mismatches == 0))

    # 2 candidates x 2 levels: each candidate's alpha is halved (Bonferroni); a candidate must win both levels.
    templates = _templates(["standing", "fast", "other"], (1, 4))
    where = f"gate decide path, 2 candidates x 2 levels ({many} campaigns)"
    for label, factor in SCENARIOS:
        base = _figures(rng, many, 1.0, (2,))
        cands = {"fast": _figures(rng, many, factor, (2,)), "other": _figures(rng, many, 1.0, (2,))}
        winners, trials = rounds_decide(templates, base, cands, (1, 4))
        if factor == 1.0:
            promoted = np.array([w is not None for w in winners])  # either identical candidate promoted
        else:
            promoted = np.array([w == "fast" for w in winners])
        rows += _scenario_rows(label + ("; the other candidate no change" if factor != 1.0 else ", both candidates"),
                               factor, promoted, trials, where=where, goals=False)
    return rows
