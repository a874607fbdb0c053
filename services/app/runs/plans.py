"""Plan show: a run's stored plan, what an approval of its sha256 would run, and who approved it.

Read from the run's bundle, re-hashed against the manifest (a plan whose bytes
changed is refused, as the services refuse it), with whether an approval in the
run's journal covers its sha256 and whether the campaign's pre-approval policy
(`review.pre_approve`) names the step. `describe` is its text, for the CLI and
for the MCP result alike: the plan view of services/shared/plan_view.py, which the
report's review-point section shows too.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from contracts.envelope import Strict
from contracts.layout import PLAN_PATHS
from services.runtime.errors import SpecdecError

if TYPE_CHECKING:
    from contracts.campaign import Campaign
    from contracts.events import RunApproved
    from services.runtime.bundle.bundle import BundleStore

# The steps that store a plan, in the order `specdec --help` lists them. Their
# paths come from contracts.layout (a plain table); the event models, the bundle
# and the approval rules load when a plan is shown, not when a parser is built.
PLAN_STEPS = ("bench", "training")


class PlanUnavailable(SpecdecError):
    """The run has no readable plan for the step."""


class StoredPlan(Strict):
    """One stored plan of a run, with its approval state."""

    run_id: str = Field(description="The run.")
    step: Literal["training", "bench"] = Field(description="The step the plan is of.")
    file: str = Field(description="Where the plan lies on the bundle root.")
    uri: str = Field(description="bundle://RUN_ID/<step>/plan.json: readable as an MCP resource.")
    sha256: str = Field(description="The hash an approval names.")
    approval: Literal["pre_approved", "approved", "none"] = Field(
        description="pre_approved: the campaign's review.pre_approve names the step; approved: a run.approved event "
        "names this hash; none: no approval yet.")
    approval_event_id: str | None = Field(description="The last run.approved event covering it; None without one.")
    approved_by: str | None = Field(description="Who that approval names; None without one.")
    document: dict[str, Any] = Field(description="The plan itself (placement, commands, deployment changes, workload "
                                     "shape, warm-up, cleanup), as stored and hash-checked, with the value of every "
                                     "secret-bearing argument (--hf-token, --api-key, ...) masked.")


def _planned_schema(step: str) -> str:
    """The event that announces the step's plan."""
    from contracts.events import BenchPlanned, TrainingPlanned

    return {"bench": BenchPlanned.SCHEMA, "training": TrainingPlanned.SCHEMA}[step]


def show_plan(bundle: BundleStore, step: str, run_id: str) -> StoredPlan:
    """The run's stored plan of `step`; PlanUnavailable, saying where to look, when there is none to trust."""
    from services.runtime.approval import covers, pre_approved
    from services.runtime.bundle.bundle import ArtifactMissing, BundleError, InvalidPath

    path, planned = PLAN_PATHS[step], _planned_schema(step)
    try:
        ref = bundle.ref(run_id, path)
        plan = bundle.read_json(run_id, path)  # re-hashes: a changed plan raises
    except (ArtifactMissing, InvalidPath):
        raise PlanUnavailable(
            f"run {run_id} has no {step} plan ({path} under {bundle.root}); it is written when the {step} step "
            f"plans (event {planned}): check `specdec status {run_id}`"
        ) from None
    except BundleError as exc:
        raise PlanUnavailable(f"the {step} plan of run {run_id} cannot be trusted: {exc}") from None
    approvals = [approval for approval in _approvals(bundle, run_id) if covers(approval, ref)]
    pre = pre_approved(_campaign(bundle, run_id), step)
    state: Literal["pre_approved", "approved", "none"] = "pre_approved" if pre else "approved" if approvals else "none"
    # Shown with every secret-bearing flag's value masked (services/shared/secret_args.py); the sha256 is
    # still the stored plan's, whose commands are launched as written.
    from services.shared.secret_args import mask_document

    return StoredPlan(run_id=run_id, step=step, file=str(bundle.resolve(ref.uri)), uri=ref.uri, sha256=ref.sha256,
                      approval=state, approval_event_id=approvals[-1].event_id if approvals else None,
                      approved_by=approvals[-1].approved_by if approvals else None, document=mask_document(plan))


def describe(shown: StoredPlan) -> str:
    """The plan as a person reads it: file, sha256, approval state, then the plan's view
    (services/shared/plan_view.py: each command on one line, each bench cell on one screen), indented."""
    head = f"{shown.step} plan of run {shown.run_id}\n  file: {shown.file}\n  sha256: {shown.sha256}\n"
    if shown.approval == "pre_approved":
        head += (f"  approval: pre-approved by the campaign's policy (review.pre_approve lists {shown.step}, with "
                 "acknowledgements.i_understand_this_mutates_cluster); it runs once stored and announced\n")
    elif shown.approval == "approved":
        head += f"  approval: covered by run.approved {shown.approval_event_id} ({shown.approved_by})\n"
    else:
        head += f"  approval: none yet; run `specdec approve {shown.run_id} --i-understand-this-mutates-cluster`\n"
    from services.shared.plan_view import plan_lines

    return head + "".join(f"  {line}\n" if line else "\n" for line in plan_lines(shown.step, shown.document))


def document_json(shown: StoredPlan) -> str:
    """The plan document as stored (secret-bearing arguments' values masked), as `--json` prints it."""
    return json.dumps(shown.document, indent=2, sort_keys=True) + "\n"


def _campaign(bundle: BundleStore, run_id: str) -> Campaign:
    from pydantic import ValidationError

    from contracts.campaign import Campaign
    from services.runtime.bundle.bundle import BundleError
    from services.runtime.bundle.bundle_records import CAMPAIGN_RELPATH

    try:
        return Campaign.model_validate(bundle.read_json(run_id, CAMPAIGN_RELPATH))
    except (BundleError, ValidationError) as exc:
        raise PlanUnavailable(f"the campaign of run {run_id} cannot be trusted, so the plan's approval state is "
                              f"unknown: {exc}") from None


def _approvals(bundle: BundleStore, run_id: str) -> list[RunApproved]:
    from pydantic import ValidationError

    from contracts.events import RunApproved

    found = []
    for event in bundle.events(run_id):
        if event.get("schema") == RunApproved.SCHEMA:
            try:
                found.append(RunApproved.model_validate(event))
            except ValidationError:
                continue  # not an approval the services would honour either
    return found
