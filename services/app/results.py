"""What the workflow's use cases return: typed, described results (the MCP tools' output schemas too)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from contracts.envelope import ArtifactRef, Strict
from services.app.runs.progress import RunStatus


class RunCreated(Strict):
    """evidence_init: a new run and its evidence bundle (empty, or holding the intent); nothing is published."""

    run_id: str | None = Field(description="The run ID: also the experiment ID and the experiment=<run-id> label "
                               "value; None when only the help was asked for.")
    bundle_path: str | None = Field(description="The run's bundle folder on the services' bundle root.")
    next_step: str = Field(description="What to call next.")
    happened: str = Field(default="", description="What the call did, in words.")
    help: str | None = Field(default=None, description="The verb's --help text, when `args` asked for it.")


class CampaignStored(Strict):
    """campaign_init: the validated campaign, stored in the run's bundle; nothing is published."""

    run_id: str = Field(description="The run the campaign was stored in.")
    bundle_path: str = Field(description="The run's bundle folder.")
    campaign: ArtifactRef = Field(description="campaign.json: the validated, resolved campaign every step reads.")
    artifacts: list[ArtifactRef] = Field(description="Everything stored: campaign (as given and resolved), the "
                                         "operator's commands, source revisions, the target's build record.")
    inert: dict[str, str] = Field(description="Fields set that change nothing, with the reason (contracts/inert.py).")
    pre_approved_steps: list[str] = Field(description="Steps whose plans the campaign's policy (review.pre_approve) "
                                          "runs without an approval; campaign_run refuses a dry run while any is set.")
    next_step: str = Field(description="What to call next.")


class PlanView(Strict):
    """One stored plan of a run: what an approval of its sha256 would run."""

    step: Literal["training", "bench"] = Field(description="The step the plan is of.")
    event_id: str = Field(description="The <step>.planned event that announced it.")
    uri: str = Field(description="bundle://RUN_ID/<step>/plan.json: readable as a resource.")
    sha256: str = Field(description="The hash an approval names (campaign_run with the flag, or approve).")
    approved: bool = Field(description="True when a run.approved event of the run names this hash.")
    text: str = Field(description="The plan as `specdec <step> plan RUN_ID` shows it (services/shared/plan_view.py): "
                      "each command on one line as launched, with the changes from the declared command; per bench "
                      "cell its identity labels, trials and concurrency.")
    document: dict[str, Any] = Field(description="The plan itself (placement, commands, deployment changes, workload "
                                     "shape, warm-up, cleanup), as stored and hash-checked, with the value of every "
                                     "secret-bearing argument masked.")


class CampaignRunResult(Strict):
    """campaign_run: what was published, and the run's plans so far."""

    run_id: str = Field(description="The run.")
    dry_run: bool = Field(description="True without the acknowledgement: plans are produced and stored, none runs.")
    published_submission: bool = Field(description="True when this call published campaign.submitted.")
    approved_sha256s: list[str] = Field(description="Plan hashes this call approved (live calls only).")
    approval_event_id: str | None = Field(description="The run.approved event this call published; None without one.")
    plans: list[PlanView] = Field(description="Every plan of the run so far, approved or not. A plan produced later "
                                  "(the bench plan waits for training) is shown by plan_show and campaign_status.")
    status: RunStatus = Field(description="Each step's state when the call returned.")
    next_step: str = Field(description="What to call next.")


class RenderedReport(Strict):
    """report_render: the report rendered into the run's bundle (write-once; same evidence, same bytes)."""

    run_id: str = Field(description="The run.")
    files: list[ArtifactRef] = Field(description="report.md, report.html, the plots and the summary, with hashes.")
    draft: bool = Field(description="True when the report is marked DRAFT.")
    draft_reasons: list[str] = Field(description="Why it is a DRAFT; empty for a final report.")
    plots: int = Field(description="Number of plots embedded.")
    next_lever: str = Field(description="The report's first suggested next lever.")
