"""gate/DECISION.json, version 1: the gate's decision and everything it rests on.

The gate writes it (services.gate.decide); the publisher reads it back from the
bundle to render the report. No I/O here.

`continue` (sequential rounds, `specdec gate --max-trials N`, the campaign's
gate.max_trials) is a decision `specdec gate` prints and the bench-runner's
rounds act on: the gate service decides with the campaign's cap, and a
`continue` fails its step (NotFinal) instead of writing DECISION.json or
emitting gate.decided (GateDecided refuses it), so a `continue` never starts the
report.
The sequential fields are optional: decisions written before them read as None.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from contracts.campaign import GateSpec
from contracts.envelope import Strict

DECISION_VERSION: Final = 1

Outcome = Literal["promote", "reject", "inconclusive", "continue"]
LevelOutcome = Literal["win", "reject", "inconclusive", "continue"]
# Why a level stopped taking trials: its interval decided it, the cap was reached, a floor failed,
# its data cannot be compared (more trials of the same data would not help), the outcome no longer
# depends on it, or the bench measured its cell no more (the cell failed there).
StopReason = Literal["decided", "cap", "floor_failed", "data_problem", "moot", "bench_failed"]
Verdict = Literal["better", "worse", "within_noise", "unavailable"]


class Interval(Strict):
    """Interval for the candidate/baseline change, in % of the baseline."""

    low_pct: float = Field(description="Lower end of the change, in % of the baseline (ratio - 1) x 100.")
    high_pct: float = Field(description="Upper end of the change, in % of the baseline.")
    confidence: float = Field(gt=0, lt=1, description="Confidence level of this interval (after the Bonferroni split).")
    method: str = Field(description="How the interval was computed, in words.")


class MetricComparison(Strict):
    """One metric of one candidate against the baseline at one concurrency level."""

    metric: str = Field(description="Metric and statistic, e.g. tpot:median, tpot:p99, output_throughput.")
    direction: Literal["higher_is_better", "lower_is_better"] = Field(description="Which way is better.")
    unit: str = Field(description="Unit of the values.")
    baseline_value: float | None = Field(description="Geometric mean of the baseline's per-trial figures.")
    candidate_value: float | None = Field(description="Geometric mean of the candidate's per-trial figures.")
    baseline_trial_values: list[float] = Field(description="The baseline's per-trial figures, in trial order.")
    candidate_trial_values: list[float] = Field(description="The candidate's per-trial figures, in trial order.")
    delta_pct: float | None = Field(description="(candidate / baseline - 1) x 100; negative is lower.")
    interval: Interval | None = Field(description="Interval for delta_pct; None when unavailable.")
    noise_bound_pct: float | None = Field(
        description="Reported, not a threshold: larger of the arms' mean pairwise trial difference over their "
        "median, x 100 (the verdict rests on the interval and the minimum effect)."
    )
    min_effect_pct: float | None = Field(
        default=None, description="The minimum effect the interval had to clear, in %; None in older decisions."
    )
    verdict: Verdict = Field(description="better, worse or within_noise; unavailable when not computable.")
    baseline_trials: int = Field(ge=0, description="Baseline trials that carry this metric.")
    candidate_trials: int = Field(ge=0, description="Candidate trials that carry this metric.")
    note: str | None = Field(default=None, description="Why the verdict is unavailable, or other caveats.")


class FloorCheck(Strict):
    """One floor the candidate itself must meet."""

    floor: Literal["acceptance_rate", "acceptance_length", "accuracy"] = Field(description="Which floor.")
    minimum: float = Field(description="The floor's value from the gate spec.")
    measured: float | None = Field(description="The candidate's figure; None when nothing to read.")
    passed: bool | None = Field(description="True when measured >= minimum; None when not measured.")
    source: str = Field(description="Where the figure came from, in words.")


class GuardCheck(Strict):
    """One guard metric (GateSpec.guards) compared at one level: worse beyond the noise rejects the candidate."""

    guard: str = Field(description="The guard as the gate spec gives it, e.g. output_throughput or ttft:p99.")
    passed: bool | None = Field(
        description="True when not worse beyond the noise, False when worse (the level rejects), None when it "
        "could not be compared (the level is inconclusive)."
    )
    comparison: MetricComparison = Field(description="The comparison, by the same statistics as the objective's.")


class ArmCounts(Strict):
    """Requests and trials of one arm at one concurrency level."""

    trials: int = Field(ge=0, description="Trial files of this arm at this level.")
    completed_requests: int = Field(ge=0, description="Requests that completed, over the trials.")
    failed_requests: int = Field(ge=0, description="Requests that failed, over the trials.")
    failed_share: float = Field(ge=0, le=1, description="failed / (completed + failed); 0 with no requests.")
    files: list[str] = Field(description="The trial files, in trial order.")


class LevelDecision(Strict):
    """One candidate against the baseline at one concurrency level."""

    concurrency: int | None = Field(description="Concurrency level; None when the load had no limit.")
    outcome: LevelOutcome = Field(
        description="win (every floor met, no guard worse, objective better), reject or inconclusive."
    )
    objective: MetricComparison | None = Field(description="The objective's comparison; None with no data at all.")
    metrics: list[MetricComparison] = Field(
        description="Every metric compared (objective first); only the objective decides."
    )
    floors: list[FloorCheck] = Field(description="The floors of the gate spec, checked on the candidate.")
    guards: list[GuardCheck] = Field(
        default_factory=list, description="Each guard metric of the gate spec compared; empty without guards."
    )
    baseline: ArmCounts = Field(description="The baseline's trials and requests at this level.")
    candidate: ArmCounts = Field(description="The candidate's trials and requests at this level.")
    unchecked_identity_fields: list[str] = Field(
        description="Identity fields that could not be compared (files without specdec's identity block)."
    )
    reasons: list[str] = Field(min_length=1, description="Every reason for the outcome, in words.")
    trials_used: int | None = Field(
        default=None, ge=0, description="Trials per arm the level was decided on (the smaller arm's count)."
    )
    stopped: StopReason | None = Field(
        default=None,
        description="Why the level took no more trials: decided (its interval cleared the minimum effect, or lies "
        "within it), cap (the maximum trials, or the trials at hand without one), floor_failed, data_problem (data "
        "that more trials would not mend), moot (the campaign's outcome no longer depends on it), bench_failed (the "
        "bench measured the cell no more: it failed there); None while it continues and in older decisions.",
    )
    trials_expected_more: int | None = Field(
        default=None, ge=0,
        description="More trials per arm the level is expected to need to decide, if its estimate and spread hold; "
        "0 once stopped; None while continuing when no decision is expected by the cap, and in older decisions.",
    )


class CandidateDecision(Strict):
    """One candidate over every concurrency level."""

    candidate: str = Field(description="Candidate name: the cell ID, or the name given to the gate.")
    outcome: LevelOutcome = Field(
        description="win (wins at every level: eligible for promotion), reject (rejected at some level), "
        "inconclusive, or continue (more trials could still change its outcome)."
    )
    levels: list[LevelDecision] = Field(description="One per concurrency level, ascending (no limit last).")
    worst_gain_pct: float | None = Field(
        description="Smallest objective improvement over the levels, in % (positive is better): the ranking key."
    )
    stops_paying_at: int | None = Field(
        description="Lowest concurrency level at which the candidate no longer wins, above a level where it does."
    )
    accuracy: float | None = Field(
        description="Candidate accuracy (or agreement) over its trials; None when unmeasured."
    )
    reasons: list[str] = Field(min_length=1, description="Why this outcome, in words.")


class Thresholds(Strict):
    """Every threshold the decision used."""

    confidence: float = Field(description="Family-wise confidence over the candidates.")
    per_candidate_confidence: float = Field(description="Confidence of each candidate's intervals (Bonferroni).")
    min_trials: int = Field(description="Trials per arm and level below which a level is inconclusive.")
    max_failed_share: float = Field(description="Failed-request share above which an arm's level is inconclusive.")
    min_effect_pct: float | None = Field(
        default=None, description="Minimum effect every interval had to clear, in %; None in older decisions."
    )
    server_bias_pct: float | None = Field(
        default=None,
        description="Measured server bias added to every interval's half-width, in %; None in older decisions.",
    )
    max_trials: int | None = Field(
        default=None, ge=1,
        description="Trials per arm and level at most (sequential rounds, specdec gate --max-trials); None: the "
        "trials at hand are the cap (one look, the plain Welch interval).",
    )
    spending: str | None = Field(
        default=None, description="How the type-I error is spread over the looks, in words; None in older decisions."
    )


class Decision(Strict):
    """The gate's decision over every candidate and concurrency level."""

    version: Literal[1] = Field(default=DECISION_VERSION, description="DECISION.json version.")
    decision: Outcome = Field(
        description="promote, reject or inconclusive; continue while a level could still change the outcome "
        "(sequential rounds only: never written by the gate service, never reported)."
    )
    winner: str | None = Field(description="The promoted candidate; None unless promoting.")
    objective: str = Field(description="Objective metric and statistic as evaluated, e.g. tpot:median.")
    direction: Literal["higher_is_better", "lower_is_better"] = Field(description="Which way the objective is better.")
    gate: GateSpec = Field(description="The gate spec as given: objective, floors and guards.")
    thresholds: Thresholds = Field(description="Thresholds of the statistics and data checks.")
    campaign_rule: str = Field(description="The rule that turned candidate outcomes into the decision, in words.")
    baseline: str = Field(description="Baseline name: the standing cell ID, or 'baseline'.")
    candidates: list[CandidateDecision] = Field(description="Every candidate, ranked: best first.")
    unchecked_identity_fields: list[str] = Field(
        description="Identity fields not compared anywhere, because some files lack specdec's identity block."
    )
    reasons: list[str] = Field(min_length=1, description="Every reason for the decision, in words.")
    draft: bool = Field(
        default=False,
        description="True when the trials came from an exploratory matrix (matrix.exploratory): the decision is a "
        "DRAFT, not evidence for promotion, whatever it says.",
    )
