"""Every event of the campaign flow, version 1.

Flow (docs/design.md#the-campaign-flow): campaign.submitted -> profile -> corpus -> capacity ->
training (plan, approval) -> bench (plan, approval) -> gate -> report -> publish.
Every step also has `<step>.requested` (start a pipeline at that step) and
`<step>.failed` (the run halts there, with the reason).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from contracts.campaign import Campaign
from contracts.envelope import ArtifactRef, Event, Key, Sha256, Strict
from contracts.inputs import input_problem
from contracts.steps import STEPS as STEPS  # re-exported: contracts.events.STEPS

Step = Literal["profile", "corpus", "capacity", "training", "bench", "gate", "report", "publish"]


class CampaignSubmitted(Event):
    """An operator submitted a campaign; its bundle already holds the campaign file."""

    SCHEMA = "campaign.submitted"
    VERSION = 1
    campaign: Campaign = Field(description="The validated campaign, as submitted.")
    campaign_ref: ArtifactRef = Field(description="The campaign as stored in the bundle before anything ran.")


class RunApproved(Event):
    """An operator approved the plans of a run that change the cluster."""

    SCHEMA = "run.approved"
    VERSION = 1
    i_understand_this_mutates_cluster: Literal[True] = Field(
        description="Typed acknowledgement that the approved plans change the cluster; must be true."
    )
    plan_sha256s: list[Sha256] = Field(
        min_length=1, description="sha256 of every plan this approval covers; a plan not listed does not run."
    )
    approved_by: str = Field(
        description="Who approved: user@host as the CLI saw it, and the Redis ACL user that published the approval, "
        "e.g. 'ops@host (Redis user specdec-operator)' (only the operator's user may write this stream)."
    )


# --- step requests and failures -------------------------------------------------


class _StepRequested(Event):
    inputs: dict[Key, ArtifactRef] = Field(
        default_factory=dict,
        description="Named inputs that replace what the earlier steps would have produced, "
        "e.g. {'training.output': ref} to re-bench an existing draft; only the names the step reads "
        "(contracts/inputs.py).",
    )
    requested_by: str = Field(description="Who requested the step (user@host or a service).")
    reason: str | None = Field(default=None, description="Why the step was requested, in words.")

    @model_validator(mode="after")
    def _known_inputs(self) -> _StepRequested:
        # A name the step does not read would be ignored: refused (contracts/inputs.py).
        problem = input_problem(self.SCHEMA.removesuffix(".requested"), self.inputs)
        if problem:
            raise ValueError(problem)
        return self


class _StepFailed(Event):
    step: Step = Field(description="The step that failed.")
    reason: str = Field(min_length=1, description="Why it failed, in words an operator can act on.")
    error_type: str = Field(description="Class of the error (exception name or a documented code).")
    artifacts: list[ArtifactRef] = Field(
        default_factory=list, description="What the step produced before it failed; kept in the bundle."
    )


def _request_and_failure(step: str) -> tuple[type[_StepRequested], type[_StepFailed]]:
    title = "".join(part.capitalize() for part in step.split("_"))
    requested = type(
        f"{title}Requested",
        (_StepRequested,),
        {"SCHEMA": f"{step}.requested", "VERSION": 1, "__doc__": f"Run the {step} step for a run.",
         "__module__": __name__},
    )
    failed = type(
        f"{title}Failed",
        (_StepFailed,),
        {"SCHEMA": f"{step}.failed", "VERSION": 1, "__doc__": f"The {step} step failed; the run halts.",
         "__module__": __name__},
    )
    return requested, failed


ProfileRequested, ProfileFailed = _request_and_failure("profile")
CorpusRequested, CorpusFailed = _request_and_failure("corpus")
CapacityRequested, CapacityFailed = _request_and_failure("capacity")
TrainingRequested, TrainingFailed = _request_and_failure("training")
BenchRequested, BenchFailed = _request_and_failure("bench")
GateRequested, GateFailed = _request_and_failure("gate")
ReportRequested, ReportFailed = _request_and_failure("report")
PublishRequested, PublishFailed = _request_and_failure("publish")

REQUESTED = {
    "profile": ProfileRequested,
    "corpus": CorpusRequested,
    "capacity": CapacityRequested,
    "training": TrainingRequested,
    "bench": BenchRequested,
    "gate": GateRequested,
    "report": ReportRequested,
    "publish": PublishRequested,
}
FAILED = {
    "profile": ProfileFailed,
    "corpus": CorpusFailed,
    "capacity": CapacityFailed,
    "training": TrainingFailed,
    "bench": BenchFailed,
    "gate": GateFailed,
    "report": ReportFailed,
    "publish": PublishFailed,
}


# --- step results ----------------------------------------------------------------


class ProfileCompleted(Event):
    """The traffic (or the named shapes) was profiled."""

    SCHEMA = "profile.completed"
    VERSION = 1
    profile: ArtifactRef = Field(description="PROFILE.json in the bundle.")
    source: Literal["traffic", "shapes"] = Field(description="Whether the profile came from traffic or named shapes.")
    records_accepted: int = Field(ge=0, description="Traffic lines profiled (0 for shapes).")
    records_rejected: int = Field(ge=0, description="Traffic lines rejected as malformed.")
    recommended_method: str = Field(description="Speculative method the profile recommends (ngram, suffix, ...).")


class CorpusCompleted(Event):
    """The matched, redacted corpus was built, or the step was skipped with its reason."""

    SCHEMA = "corpus.completed"
    VERSION = 1
    corpus: ArtifactRef | None = Field(description="CORPUS.jsonl in the bundle; None when skipped.")
    manifest: ArtifactRef | None = Field(description="CORPUS.jsonl.manifest.json; None when skipped.")
    train_records: int = Field(ge=0, description="Records in the train split.")
    heldout_records: int = Field(ge=0, description="Records in the heldout split.")
    skipped_reason: str | None = Field(default=None, description="Why no corpus was built (shapes-only campaign).")


class CapacitySelected(Event):
    """An idle node was found; nothing was reserved."""

    SCHEMA = "capacity.selected"
    VERSION = 1
    scheduler: Literal["local", "slurm", "kubernetes"] = Field(description="Scheduler that was read.")
    node: str = Field(description="The selected node.")
    snapshot: ArtifactRef = Field(description="Everything seen (raw scheduler outputs) in the bundle.")
    corpus: ArtifactRef | None = Field(
        default=None,
        description="The corpus the run trains on, carried from corpus.completed; None when the run has none "
        "(named shapes) or the selection was requested on its own.",
    )
    idle_check_skipped: str | None = Field(
        default=None,
        description="Why the operator's idle check (capacity.idle_check) was not run before this selection: the "
        "run is not acknowledged (acknowledgements.i_understand_this_mutates_cluster false, as in a dry run), so "
        "the node was selected from the scheduler's read-only view alone; the idle check runs at the pre-launch "
        "re-check of an acknowledged run. None when it ran and passed on the node.",
    )


class CapacityUnavailable(Event):
    """No idle node was found; the run waits or halts here."""

    SCHEMA = "capacity.unavailable"
    VERSION = 1
    scheduler: Literal["local", "slurm", "kubernetes"] = Field(description="Scheduler that was read.")
    reasons: list[str] = Field(min_length=1, description="Why each candidate node was not idle.")
    snapshot: ArtifactRef = Field(description="Everything seen (raw scheduler outputs) in the bundle.")


class TrainingPlanned(Event):
    """The training plan is stored and waits for an approval of its hash."""

    SCHEMA = "training.planned"
    VERSION = 1
    plan: ArtifactRef = Field(description="The plan in the bundle; its sha256 is what an approval names.")
    executor: Literal["local", "slurm", "kubernetes"] = Field(description="Where training would run.")
    node: str = Field(description="Node the plan places training on.")
    skipped_reason: str | None = Field(
        default=None, description="Why no training is needed (shapes-only campaign, no trained candidate)."
    )


class TrainingStarted(Event):
    """The approved training plan started."""

    SCHEMA = "training.started"
    VERSION = 1
    plan_sha256: Sha256 = Field(description="sha256 of the approved plan that runs.")
    executor: Literal["local", "slurm", "kubernetes"] = Field(description="Where training runs.")
    handle: str = Field(description="Process ID, Slurm job ID or Job name of the trainer.")


class TrainingCompleted(Event):
    """Training finished and its outputs are captured and hashed."""

    SCHEMA = "training.completed"
    VERSION = 1
    output: ArtifactRef | None = Field(
        description="Output manifest (every output file and its sha256); None when skipped."
    )
    checkpoint_dir: str | None = Field(description="Directory of the trained draft checkpoint; None when skipped.")
    duration_s: float = Field(ge=0, description="Wall time of the trainer in seconds.")
    reused_from: str | None = Field(default=None, description="Run ID whose identical draft was reused, if any.")
    skipped_reason: str | None = Field(default=None, description="Why training was skipped, if it was.")
    scheduler: Literal["local", "slurm", "kubernetes"] | None = Field(
        default=None, description="The scheduler of the capacity selection the run holds; None when none is known."
    )
    node: str | None = Field(
        default=None, description="The idle node the capacity step selected (the bench's default placement)."
    )
    corpus: ArtifactRef | None = Field(
        default=None, description="The corpus whose heldout split the bench measures; None when the run has none."
    )


class BenchPlanned(Event):
    """The serving comparison plan is stored and waits for an approval of its hash."""

    SCHEMA = "bench.planned"
    VERSION = 1
    plan: ArtifactRef = Field(description="The plan in the bundle; its sha256 is what an approval names.")
    cells: list[Key] = Field(min_length=1, description="Cell IDs the plan would run, in order.")
    trials: int = Field(ge=1, description="Trials per cell.")


class SpecDecodeDelta(Strict):
    """Speculative-decoding counter deltas over one measured window."""

    num_drafts: int = Field(ge=0, description="Delta of vllm:spec_decode_num_drafts_total.")
    num_draft_tokens: int = Field(ge=0, description="Delta of vllm:spec_decode_num_draft_tokens_total.")
    num_accepted_tokens: int = Field(ge=0, description="Delta of vllm:spec_decode_num_accepted_tokens_total.")
    accepted_per_position: list[int] = Field(description="Delta of accepted tokens at each draft position.")
    acceptance_rate: float | None = Field(description="accepted / draft tokens; None without drafts.")
    mean_acceptance_length: float | None = Field(description="1 + accepted / drafts; None without drafts.")


class BenchTrialCompleted(Event):
    """One trial of one cell at one concurrency level was measured."""

    SCHEMA = "bench.trial.completed"
    VERSION = 1
    cell_id: Key = Field(description="The cell measured.")
    trial: int = Field(ge=0, description="Trial index within the cell, from 0.")
    concurrency: int = Field(ge=1, description="Maximum concurrency of the measured load.")
    result: ArtifactRef = Field(description="The trial's result JSON (vllm bench serve keys and units).")
    completed_requests: int = Field(ge=0, description="Requests that completed.")
    failed_requests: int = Field(ge=0, description="Requests that failed.")
    median_ttft_ms: float | None = Field(description="Median time to first token, ms.")
    median_tpot_ms: float | None = Field(description="Median time per output token after the first, ms.")
    spec_decode: SpecDecodeDelta | None = Field(
        description="Counter deltas; None when the cell declares no speculation."
    )


class BenchCompleted(Event):
    """Every cell of the plan was measured (or failed, as listed)."""

    SCHEMA = "bench.completed"
    VERSION = 1
    results: list[ArtifactRef] = Field(description="Every trial result JSON of the run.")
    failed_cells: dict[Key, str] = Field(default_factory=dict, description="Cell ID -> why it failed.")
    draft: bool = Field(description="True when the matrix was exploratory (matrix.exploratory): results are DRAFT.")


class GateDecided(Event):
    """The gate's decision on the candidates."""

    SCHEMA = "gate.decided"
    VERSION = 1
    decision: Literal["promote", "reject", "inconclusive"] = Field(description="The campaign decision.")
    winner: Key | None = Field(description="The promoted candidate cell; None unless promoting.")
    decision_ref: ArtifactRef = Field(description="DECISION.json in the bundle.")
    reasons: list[str] = Field(min_length=1, description="Every reason for the decision, in words.")


class ReportRendered(Event):
    """The report was rendered from the bundle."""

    SCHEMA = "report.rendered"
    VERSION = 1
    markdown: ArtifactRef = Field(description="The Markdown report.")
    html: ArtifactRef = Field(description="The self-contained HTML report.")
    draft: bool = Field(description="True when the report is marked DRAFT, and why is in the report.")


class ReportPublished(Event):
    """The report was published (or a dry run showed where it would go)."""

    SCHEMA = "report.published"
    VERSION = 1
    target: str = Field(description="file:// or https:// target.")
    dry_run: bool = Field(description="True when nothing was sent.")
    sent: list[ArtifactRef] = Field(description="What was (or would be) sent, with hashes.")
    response: ArtifactRef | None = Field(default=None, description="The target's recorded response, for HTTP.")


ALL_EVENTS: tuple[type[Event], ...] = (
    CampaignSubmitted,
    RunApproved,
    *REQUESTED.values(),
    *FAILED.values(),
    ProfileCompleted,
    CorpusCompleted,
    CapacitySelected,
    CapacityUnavailable,
    TrainingPlanned,
    TrainingStarted,
    TrainingCompleted,
    BenchPlanned,
    BenchTrialCompleted,
    BenchCompleted,
    GateDecided,
    ReportRendered,
    ReportPublished,
)
