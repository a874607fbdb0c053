"""The report's last section: the next measured lever, and the gate that can prove or reject it.

The rules are evaluated in the order docs/publisher.md#next-measured-lever lists them; the first that fires
is the next measured lever, the others follow. Each names the numbers and identities it rests on and a gate
built from the campaign's own gate spec. Pure: a function of `CampaignData`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from contracts import layout
from contracts.artifacts.results import MAX_FAILED_SHARE
from services.publisher.report.figures import Acceptance, acceptance, failed_share, speedups
from services.publisher.report.model import ArmLevel, CampaignData, arm_key
from services.shared.formatting import concurrency, interval, number, percent, share

COLLAPSE_CONDITIONAL = 0.5  # p_j below this: fewer than half the steps reaching j-1 also reach j
EXTEND_CONDITIONAL = 0.7  # p_k at or above this: the last position still usually accepts
LOW_EFFICIENCY = 0.5  # less than half the ideal gain survives the cost of speculating
MAX_SUGGESTED_TRIALS = 50  # beyond this, ask for a larger effect instead of more trials


@dataclass(frozen=True)
class Lever:
    """One measured lever: what the data shows, what to try next, and the gate that decides it."""

    rule: str
    finding: str
    action: str
    gate: str
    evidence: tuple[str, ...]  # identity pointers (ArmLevel keys) the finding rests on


def levers(data: CampaignData) -> list[Lever]:
    """Every lever the data supports, the next one first; never empty."""
    found: list[Lever] = []
    for rule in RULES:
        found.extend(rule(data))
    return found or [_next_level(data)]


# --- gate text -------------------------------------------------------------------


def gate_text(data: CampaignData, *, levels: list[int | None] | None = None, min_trials: int | None = None) -> str:
    """The gate that proves or rejects a lever, from the campaign's own gate spec."""
    spec = data.decision.gate if data.decision else (data.campaign.gate if data.campaign else None)
    objective = data.decision.objective if data.decision else (spec.objective if spec and spec.objective else "tpot")
    floors = []
    if spec is not None:
        floors = [
            f"{name} >= {value:g}"
            for name, value in (
                ("acceptance rate", spec.acceptance_floor),
                ("mean acceptance length", spec.acceptance_length_floor),
                ("accuracy", spec.accuracy_floor),
            )
            if value is not None
        ]
    trials = min_trials or _min_trials(data)
    at = ", ".join(concurrency(c) for c in (levels if levels is not None else data.levels))
    baseline = data.baseline_cell_id or "the standing cell"
    return (
        f"specdec gate on {objective} against {baseline} at concurrency {at}: promote only if it is better beyond "
        f"the noise bound at every level" + (f", with {', '.join(floors)}" if floors else "")
        + f"; at least {trials} trials per arm; reject if worse beyond the bound or below a floor."
    )


# --- rules -----------------------------------------------------------------------


def _failed_requests(data: CampaignData) -> list[Lever]:
    bad = [(arm, failed_share(arm)) for arm in data.arms if failed_share(arm) > MAX_FAILED_SHARE]
    if not bad:
        return []
    worst, worst_share = max(bad, key=lambda item: item[1])
    return [Lever(
        rule="failed-requests",
        finding=f"{len(bad)} arm(s) failed more than {share(MAX_FAILED_SHARE)} of requests; worst {worst.key}: "
        f"{share(worst_share, decimals=1)}",
        action=f"find why {worst.cell_id} fails requests at concurrency {concurrency(worst.concurrency)} "
        f"(server log in {layout.BENCH_DIR}/{worst.cell_id}/), fix it, and re-bench: latencies of the survivors hide "
        "the slow requests",
        gate=gate_text(data, levels=sorted({a.concurrency for a, _ in bad}, key=_order)),
        evidence=tuple(arm.key for arm, _ in bad),
    )]


def _missing_trials(data: CampaignData) -> list[Lever]:
    short = [a for a in data.arms if a.trials_declared is not None and len(a.trials) < a.trials_declared]
    if not short:
        return []
    missing = sum(a.trials_declared - len(a.trials) for a in short if a.trials_declared is not None)
    return [Lever(
        rule="missing-trials",
        finding=f"{missing} declared trial(s) have no results: "
        + ", ".join(f"{a.key} {len(a.trials)}/{a.trials_declared}" for a in short),
        action=f"complete the bench (specdec request bench {data.run_id}): the gate reads only trials with results, "
        "so these levels cannot be decided",
        gate=gate_text(data, levels=sorted({a.concurrency for a in short}, key=_order)),
        evidence=tuple(a.key for a in short),
    )]


def _too_few_trials(data: CampaignData) -> list[Lever]:
    need = _min_trials(data)
    few = [a for a in data.arms if a.trials and (a.trials_declared or len(a.trials)) < need]
    if not few:
        return []
    return [Lever(
        rule="too-few-trials",
        finding=f"{len(few)} arm(s) declare fewer trials than the gate's {need} per arm: "
        + ", ".join(f"{a.key} {a.trials_declared or len(a.trials)}" for a in few),
        action=f"re-bench with {need} trials per arm: below that the gate cannot tell a change from trial-to-trial "
        "noise",
        gate=gate_text(data, min_trials=need),
        evidence=tuple(a.key for a in few),
    )]


def _acceptance_collapse(data: CampaignData) -> list[Lever]:
    out = []
    for cell, arms, acc in _pooled_by_cell(data):
        if acc.k < 2:
            continue
        p = acc.conditional
        j = next((i + 1 for i in range(1, acc.k) if p[i] < COLLAPSE_CONDITIONAL), None)
        if j is None:
            continue
        kept = 1 + sum(acc.per_position[: j - 1])
        out.append(Lever(
            rule="acceptance-collapse",
            finding=f"{cell}: acceptance collapses after position {j - 1}: p_{j} = {p[j - 1]:.2f} "
            f"(a_{j - 1} = {acc.per_position[j - 2]:.2f}, a_{j} = {acc.per_position[j - 1]:.2f}); "
            f"positions {j}..{acc.k} add {sum(acc.per_position[j - 1:]):.2f} tokens per step for {acc.k - j + 1} "
            "extra draft token(s) each step",
            action=f"try num_speculative_tokens = {j - 1} (now {acc.k}) for {cell}: predicted tokens per step "
            f"{kept:.2f} instead of {acc.mean_length:.2f}, at a lower drafting and verification cost",
            gate=gate_text(data),
            evidence=tuple(a.key for a in arms),
        ))
    return out


def _floor_failed(data: CampaignData) -> list[Lever]:
    if data.decision is None:
        return []
    out = []
    for cand in data.decision.candidates:
        failed = {f.floor: f for lvl in cand.levels for f in lvl.floors if f.passed is False}
        for floor in failed.values():
            method = _method(data, cand.candidate)
            hint = {
                "ngram": "widen the n-gram match (prompt_lookup_min/max) or switch to a draft trained on this traffic",
                "suffix": "switch to a draft trained on this traffic",
            }.get(method or "", "train the draft on more traffic matched to the held-out prompts, or try ngram/suffix")
            out.append(Lever(
                rule="floor-failed",
                finding=f"{cand.candidate}: {floor.floor} {number(floor.measured, '.3g')} is below the floor "
                f"{floor.minimum:g}",
                action=f"{hint} ({cand.candidate} is {method or 'of unknown method'})",
                gate=gate_text(data),
                evidence=tuple(a.key for a in data.arms if a.cell_id == cand.candidate),
            ))
    return out


def _win_vanishes(data: CampaignData) -> list[Lever]:
    if data.decision is None:
        return []
    out = []
    for cand in data.decision.candidates:
        stop = cand.stops_paying_at
        at_stop = next((lvl.objective for lvl in cand.levels if lvl.concurrency == stop), None)
        if stop is None or at_stop is None or at_stop.delta_pct is None:
            continue  # no measured objective there: missing-trials / too-few-trials say what to run
        wins = [lvl.concurrency for lvl in cand.levels
                if lvl.outcome == "win" and _order(lvl.concurrency) < _order(stop)]
        gains = {lvl.concurrency: lvl.objective.delta_pct for lvl in cand.levels if lvl.objective}
        out.append(Lever(
            rule="win-vanishes",
            finding=f"{cand.candidate} wins at concurrency {', '.join(concurrency(c) for c in wins)} but not at {stop} "
            f"(objective change there {percent(gains.get(stop))})",
            action=f"cap speculation for {cand.candidate} below concurrency {stop}: serve its speculative config only "
            f"while concurrency < {stop} and the standing config above",
            gate=gate_text(data, levels=[*wins, stop]),
            evidence=tuple(a.key for a in data.arms if a.cell_id == cand.candidate),
        ))
    return out


def _overhead(data: CampaignData) -> list[Lever]:
    slow = [s for s in speedups(data) if s.efficiency < LOW_EFFICIENCY]
    if not slow:
        return []
    worst = min(slow, key=lambda s: s.efficiency)
    return [Lever(
        rule="speculation-overhead",
        finding=f"{worst.candidate.key}: predicted speedup {worst.predicted:.2f}x from acceptance, realized "
        f"{worst.realized:.2f}x ({share(worst.efficiency)} of it); one speculative step costs "
        f"{worst.overhead:.2f} plain steps more than it should",
        action=f"cut the cost of speculating in {worst.candidate.cell_id}: a cheaper proposer (ngram, a smaller draft) "
        "or fewer speculative tokens",
        gate=gate_text(data),
        evidence=tuple(s.candidate.key for s in slow),
    )]


def _beat_noise(data: CampaignData) -> list[Lever]:
    decision = data.decision
    if decision is None or any(c.outcome == "win" for c in decision.candidates):
        return []
    out = []
    for cand in decision.candidates:
        for lvl in cand.levels:
            obj = lvl.objective
            if obj is None or obj.verdict != "within_noise" or obj.delta_pct is None or obj.interval is None:
                continue
            n = min(obj.baseline_trials, obj.candidate_trials)
            delta, noise = abs(obj.delta_pct), obj.noise_bound_pct or 0.0
            half = (obj.interval.high_pct - obj.interval.low_pct) / 2
            needed = math.ceil(n * (half / delta) ** 2) if delta > 0 else None
            key = arm_key(cand.candidate, lvl.concurrency)
            if delta <= noise or needed is None or needed > MAX_SUGGESTED_TRIALS:
                action = (
                    f"the change ({percent(obj.delta_pct)}) does not clear the A/A noise bound "
                    f"({percent(noise, signed=False)}), which more trials do not shrink: look for a larger effect (a "
                    "candidate with higher acceptance) or quieter "
                    "trials (warm regime, pinned CPUs, nothing else on the node)"
                )
                trials = None
            else:
                action = f"re-bench with {needed} trials per arm (now {n}): the interval half-width " \
                    f"{percent(half, signed=False)} then falls below the observed {percent(delta, signed=False)}"
                trials = needed
            out.append(Lever(
                rule="beat-noise",
                finding=f"{key}: objective {obj.metric} {percent(obj.delta_pct)}, interval "
                f"{interval(obj.interval.low_pct, obj.interval.high_pct)} %, "
                f"noise bound {percent(noise, signed=False)}, {n} trials per arm: within noise",
                action=action,
                gate=gate_text(data, levels=[lvl.concurrency], min_trials=trials),
                evidence=(key,),
            ))
    return out


def _extend_k(data: CampaignData) -> list[Lever]:
    if data.decision is None:
        return []
    winners = {c.candidate for c in data.decision.candidates if c.outcome == "win"}
    out = []
    for cell, arms, acc in _pooled_by_cell(data):
        if cell not in winners or acc.conditional[-1] < EXTEND_CONDITIONAL:
            continue
        gain = acc.per_position[-1] * acc.conditional[-1]
        out.append(Lever(
            rule="extend-k",
            finding=f"{cell} wins and its last position still accepts: p_{acc.k} = {acc.conditional[-1]:.2f}",
            action=f"try num_speculative_tokens = {acc.k + 1} for {cell}: if p stays at {acc.conditional[-1]:.2f} the "
            f"extra position adds about {gain:.2f} tokens per step "
            f"({acc.mean_length:.2f} -> {acc.mean_length + gain:.2f})",
            gate=gate_text(data) + f" Compare against {cell} as well: the new cell must beat it beyond noise.",
            evidence=tuple(a.key for a in arms),
        ))
    return out


def _next_level(data: CampaignData) -> Lever:
    levels = [c for c in data.levels if c is not None]
    nxt = max(levels) * 2 if levels else 1
    best = data.decision.winner if data.decision and data.decision.winner else None
    subject = best or (data.decision.candidates[0].candidate if data.decision and data.decision.candidates else None)
    return Lever(
        rule="next-level",
        finding=f"no rule above fired on {len(data.arms)} arm(s) at concurrency "
        f"{', '.join(concurrency(c) for c in data.levels)}"
        + (f"; the gate decided {data.decision.decision}" if data.decision else "; no gate decision yet"),
        action=f"measure {subject or 'the candidates'} at concurrency {nxt}, where batching competes with speculation",
        gate=gate_text(data, levels=[*data.levels, nxt]),
        evidence=tuple(a.key for a in data.arms if subject is None or a.cell_id == subject),
    )


RULES: tuple[Callable[[CampaignData], list[Lever]], ...] = (
    _failed_requests,
    _missing_trials,
    _too_few_trials,
    _acceptance_collapse,
    _floor_failed,
    _win_vanishes,
    _overhead,
    _beat_noise,
    _extend_k,
)


# --- helpers ---------------------------------------------------------------------


def _pooled_by_cell(data: CampaignData) -> list[tuple[str, list[ArmLevel], Acceptance]]:
    """Each speculative candidate's counters pooled over its levels (acceptance is a property of the proposer
    on this traffic; concurrency changes its cost, not what it proposes)."""
    out = []
    for cell in data.cells():
        measured = [(a, acc) for a in data.arms
                    if a.cell_id == cell and a.role == "candidate" and (acc := acceptance(a))]
        if not measured:
            continue
        drafts = sum(acc.drafts for _, acc in measured)
        k = max(acc.k for _, acc in measured)
        # a_i pooled: accepted-at-i counts summed over levels, over all drafts (a level with fewer positions adds 0).
        per_pos = [sum(acc.per_position[i] * acc.drafts for _, acc in measured if i < acc.k) / drafts for i in range(k)]
        pooled = Acceptance(
            drafts=drafts,
            draft_tokens=sum(acc.draft_tokens for _, acc in measured),
            accepted=sum(acc.accepted for _, acc in measured),
            per_position=tuple(per_pos),
        )
        out.append((cell, [a for a, _ in measured], pooled))
    return out


def _min_trials(data: CampaignData) -> int:
    """Trials per arm the gate needs: what it used, else the campaign's gate spec, else the gate's default."""
    if data.decision is not None:
        return data.decision.thresholds.min_trials
    return data.campaign.gate.min_trials if data.campaign is not None else 3


def _method(data: CampaignData, cell: str) -> str | None:
    for arm in data.arms:
        if arm.cell_id == cell and arm.identity and arm.identity.serving_config.speculative:
            return arm.identity.serving_config.speculative.method
    return None


def _order(c: int | None) -> float:
    return math.inf if c is None else c
