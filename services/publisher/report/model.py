"""The aggregated campaign, version 1: everything a report is rendered from.

`aggregate.read_campaign` builds it from a run's bundle; the report, its
plots, the DRAFT marking and the levers are pure functions of it. Per-record
problems (an unreadable result file, an invalid DECISION.json) are data here,
listed in `problems` and turned into DRAFT reasons, never exceptions.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from contracts.artifacts.corpus import Redaction
from contracts.artifacts.decision import Decision
from contracts.artifacts.engine import EngineCheck
from contracts.artifacts.offline_acceptance import OfflineAcceptance
from contracts.artifacts.profile import NgramAdvice
from contracts.artifacts.results import TrialIdentity
from contracts.artifacts.suffix import SuffixPrediction
from contracts.artifacts.training import DraftCost
from contracts.campaign import Campaign
from contracts.campaign.canonical import CanonicalRecord
from contracts.envelope import Key, RunId, Sha256, Strict
from contracts.events import SpecDecodeDelta

AGGREGATE_VERSION: Final = 1

# The campaign steps whose evidence a report rests on, in flow order. report and
# publish come after the report and are not part of its evidence.
EVIDENCE_STEPS: tuple[str, ...] = ("profile", "corpus", "capacity", "training", "bench", "gate")
StepState = Literal["done", "skipped", "failed", "missing"]


class StepStatus(Strict):
    """The last outcome of one campaign step, as the run's events (and artifacts) show it."""

    step: str = Field(description="The step (profile, corpus, capacity, training, bench, gate).")
    state: StepState = Field(description="done, skipped (recorded with a reason), failed or missing.")
    detail: str | None = Field(default=None, description="The event that decided the state and its reason, in words.")


class TrialFigures(Strict):
    """The figures of one trial result file (one cell, one concurrency level, one trial)."""

    trial: int | None = Field(
        description="Trial index from the identity block or the `trial-<n>` folder; None if neither."
    )
    path: str = Field(description="The result file's path relative to the run's bundle.")
    sha256: Sha256 = Field(description="sha256 of the result file as recorded in the bundle.")
    completed: int = Field(ge=0, description="Requests that completed.")
    failed: int = Field(ge=0, description="Requests that failed.")
    ttft_ms: float | None = Field(description="Median time to first token over the trial's requests, ms.")
    tpot_ms: float | None = Field(description="Median time per output token after the first, ms.")
    itl_ms: float | None = Field(description="Median inter-chunk latency, ms.")
    e2el_ms: float | None = Field(description="Median end-to-end latency, ms.")
    output_throughput_tok_per_s: float | None = Field(description="Output tokens per second of the trial.")
    spec_decode: SpecDecodeDelta | None = Field(description="Spec-decode counter deltas of the trial's window.")
    accuracy: float | None = Field(
        description="Accuracy (or agreement) of the trial's outputs; None when not evaluated."
    )
    identity: TrialIdentity | None = Field(description="The trial's identity block; None in a plain vLLM file.")


class ArmLevel(Strict):
    """One cell at one concurrency level: its trials and the identity every figure of it carries."""

    key: str = Field(description="Identity pointer used by every table row and plot: '<cell_id>@c<concurrency>'.")
    cell_id: Key = Field(description="The cell.")
    role: Literal["standing", "candidate"] | None = Field(description="standing or candidate; None when nothing says.")
    concurrency: int | None = Field(description="Maximum concurrency of the load; None when the load had no limit.")
    baseline_cell_id: Key | None = Field(description="The named baseline (standing cell) a candidate is compared with.")
    identity: TrialIdentity | None = Field(description="Identity of the lowest trial; None when no trial carries one.")
    trials: list[TrialFigures] = Field(description="The trials found, in trial order.")
    trials_declared: int | None = Field(description="Trials the plan (or the identity) declared; None when unknown.")
    identity_problems: list[str] = Field(description="Why this arm's identity is incomplete or inconsistent, in words.")


class RejectedTrial(Strict):
    """A trial kept out of every figure: its spec-decode counters contradict its declared speculation."""

    path: str = Field(description="The file's path relative to the run's bundle.")
    cell_id: Key | None = Field(description="The cell, from the identity block (else the path); None if neither says.")
    concurrency: int | None = Field(description="Concurrency level of the trial; None when the file does not say.")
    trial: int | None = Field(description="Trial index; None when the file does not say.")
    by: Literal["bench", "report"] = Field(
        description="bench: the bench-runner rejected it (rejected-c<k>.json); report: a result file the report's "
        "re-check of the spec-decode rule rejected (edited by hand, or written by an older bench)."
    )
    reasons: list[str] = Field(description="Why, in words (the bench's speculation_problems, or the re-check's).")


class LaunchEngine(Strict):
    """One server launch of a cell and the engine's read-back of its effective config."""

    cell_id: Key = Field(description="The cell served.")
    launch: int | None = Field(description="Index of the launch in the bench plan; None when no plan names it.")
    path: str | None = Field(
        description="The EngineCheck file (contracts.layout.engine_check); None when none was written."
    )
    check: EngineCheck | None = Field(description="The read-back; None when the launch has none (not read back).")


class PlanReview(Strict):
    """How one stored plan of a reviewed step (training, bench) passed the review point."""

    step: Literal["training", "bench"] = Field(description="The reviewed step whose plan this is.")
    plan_uri: str = Field(description="The plan as the `<step>.planned` event names it (bundle://RUN/<step>/plan.json).")
    plan_sha256: Sha256 = Field(description="sha256 of the stored plan, as announced.")
    by: Literal["approval", "policy", "none"] = Field(
        description="approval: a run.approved naming the plan's sha256 (the first one in the journal ran it); "
        "policy: the campaign's pre-approval policy (review.pre_approve names the step, with the acknowledgement), "
        "so it ran once stored and announced; none: nothing approved it, so it did not run."
    )
    approval_event_id: str | None = Field(
        default=None, description="The run.approved event that approved it; None otherwise."
    )
    approved_by: str | None = Field(
        default=None, description="Who approved it (run.approved approved_by); None otherwise."
    )
    approved_sha256s: list[Sha256] = Field(
        default_factory=list, description="Every plan sha256 that approval named; empty without an approval."
    )
    view: list[str] = Field(
        default_factory=list, description="The stored plan as `specdec <step> plan RUN_ID` shows it "
        "(services/shared/plan_view.py), secret-bearing values masked; empty when the stored plan is not this "
        "announced one or cannot be read.")


class CampaignData(Strict):
    """A run's campaign as read from its bundle."""

    version: Literal[1] = Field(default=AGGREGATE_VERSION, description="Version of this aggregate.")
    run_id: RunId = Field(description="The run.")
    campaign: Campaign | None = Field(description="campaign.json; None when missing or invalid (see problems).")
    decision: Decision | None = Field(description="gate/DECISION.json; None when missing or invalid (see problems).")
    decision_sha256: Sha256 | None = Field(description="sha256 of DECISION.json as recorded in the bundle.")
    plan: dict[str, Any] | None = Field(description="bench/plan.json as stored; None when the bundle has none.")
    steps: list[StepStatus] = Field(description="Every evidence step, in flow order.")
    journal_present: bool = Field(description="Whether the bundle holds events.jsonl at all.")
    arms: list[ArmLevel] = Field(description="Every cell x concurrency level with trials or declared by the plan.")
    bench_exploratory: bool = Field(description="True when bench.completed or the plan marked the matrix exploratory.")
    failed_cells: dict[str, str] = Field(description="Cells bench.completed lists as failed, with why.")
    problems: list[str] = Field(
        description="Unreadable or invalid inputs (files, DECISION.json, campaign.json), in words."
    )
    draft_reused_from: RunId | None = Field(
        default=None,
        description="The run whose draft model this run reused, its training inputs being identical "
        "(training.completed reused_from); None when the draft was trained here, or none was needed.",
    )
    draft_input_key: Sha256 | None = Field(
        default=None,
        description="The draft's training input key (training/input-key.json); None when the bundle has none.",
    )
    rejected: list[RejectedTrial] = Field(
        default_factory=list, description="Trials kept out of every figure and plot, with why, in path order."
    )
    engine: list[LaunchEngine] = Field(
        default_factory=list,
        description="Every launch of the plan (or with a read-back file) and its engine read-back, in plan order.",
    )
    redaction: Redaction | None = Field(
        default=None,
        description="What the corpus step redacted, per kind (corpus/CORPUS.jsonl.manifest.json); "
        "None without a corpus.",
    )
    ngram_advice: NgramAdvice | None = Field(
        default=None, description="The profile's ngram advice (profile/PROFILE.json); None when the bundle has none."
    )
    ngram_advice_note: str | None = Field(
        default=None, description="Why there is no ngram advice (no profile, an older or invalid one); None with it."
    )
    suffix_prediction: SuffixPrediction | None = Field(
        default=None,
        description="Suffix acceptance predicted offline by the profiler (profile/SUFFIX_PREDICTION.json); "
        "None when the bundle has none.")
    suffix_prediction_note: str | None = Field(
        default=None, description="Why there is no suffix prediction file; None with one.")
    offline_acceptance: OfflineAcceptance | None = Field(
        default=None, description="The trained draft's acceptance its trainer estimated before serving "
        "(training/output/offline-acceptance.json, as training/outputs.json lists it); None without one. "
        "Set beside the served acceptance in the report; the gate never reads it.")
    offline_acceptance_note: str | None = Field(
        default=None, description="Why there is no offline estimate (no training outputs, no such file, an invalid "
        "one); None with one.")
    training_output_dir: str | None = Field(
        default=None, description="The trainer's output folder as training/outputs.json names it: a cell serving "
        "this path serves the trained draft; None without training outputs.")
    draft_cost: DraftCost | None = Field(
        default=None, description="The draft's per-token cost against the target's (training/draft-cost.json); None "
        "when not measured.",
    )
    draft_cost_note: str | None = Field(
        default=None, description="Why there is no draft cost (file absent or invalid); None with one."
    )
    target_build: dict[str, Any] | None = Field(
        default=None, description="The target checkpoint's build record (operator/target-build.json): its source, "
        "hashes and conversion versions; None when the checkpoint carries none.",
    )
    target_build_note: str | None = Field(default=None, description="Why there is no build record; None with one.")
    intent: str | None = Field(default=None, description="What the campaign is for, as the workflow's "
                               "evidence_init was told (intent.json); None without one.")
    canonical: CanonicalRecord | None = Field(
        default=None, description="What a canonical matrix file said beyond the campaign (canonical.json: name, "
        "description, provenance, each cell's notes, labels, exact command and launch changes); None otherwise.")
    reviews: list[PlanReview] = Field(
        default_factory=list,
        description="Every plan announced at the review point (training, bench), in journal order, "
        "with what approved it.",
    )

    @property
    def baseline_cell_id(self) -> str | None:
        standing = sorted({arm.cell_id for arm in self.arms if arm.role == "standing"})
        return standing[0] if len(standing) == 1 else None

    @property
    def levels(self) -> list[int | None]:
        """Every concurrency level measured or declared, ascending (no limit last)."""
        return sorted({arm.concurrency for arm in self.arms}, key=lambda c: (c is None, c or 0))

    def arm(self, cell_id: str, concurrency: int | None) -> ArmLevel | None:
        for arm in self.arms:
            if arm.cell_id == cell_id and arm.concurrency == concurrency:
                return arm
        return None

    def cells(self) -> list[str]:
        """Cell IDs, standing first, then candidates in the order first seen."""
        ordered: list[str] = []
        for arm in sorted(self.arms, key=lambda a: a.role != "standing"):
            if arm.cell_id not in ordered:
                ordered.append(arm.cell_id)
        return ordered


def arm_key(cell_id: str, concurrency: int | None) -> str:
    return f"{cell_id}@c{concurrency if concurrency is not None else 'inf'}"
