"""`specdec bench plan RUN_ID` and `specdec training plan RUN_ID`: print a stored plan.

The plans are what an approval names (services/runtime/approval.py), so an
operator reads them before `specdec approve`. Offline: read from the run's
bundle under SPECDEC_BUNDLE_ROOT, re-hashed against the manifest (a plan whose
bytes changed is refused, as the services refuse it), with whether an approval
in the run's journal already covers its sha256 and whether the campaign's
pre-approval policy (`review.pre_approve`) names the step.

Exit 0 with the plan; 2 with the reason when the run has no such plan.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import TYPE_CHECKING, Any, TextIO

from contracts.layout import PLAN_PATHS
from services.runtime.errors import SpecdecError

if TYPE_CHECKING:
    from contracts.campaign import Campaign
    from contracts.events import RunApproved
    from services.runtime.bundle import BundleStore

# The steps that store a plan, in the order `specdec --help` lists them. Their
# paths come from contracts.layout (a plain table); the event models, the bundle
# and the approval rules load when a plan is shown, not when the parser is built.
PLAN_STEPS = ("bench", "training")


def _planned_schema(step: str) -> str:
    """The event that announces the step's plan."""
    from contracts.events import BenchPlanned, TrainingPlanned

    return {"bench": BenchPlanned.SCHEMA, "training": TrainingPlanned.SCHEMA}[step]


class PlanUnavailable(SpecdecError):
    """The run has no readable plan for the step."""


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    for step in PLAN_STEPS:
        path = PLAN_PATHS[step]
        p = subparsers.add_parser(step, help=f"the {step} step's stored plan")
        steps = p.add_subparsers(dest=f"{step}_command", required=True)
        q = steps.add_parser(
            "plan", help=f"print the {step} plan of a run (what an approval of its sha256 would run)",
            description=f"Print {path} of the run's bundle: every command that would run, where, and the cleanup; "
            "with its sha256 and whether an approval covers it.",
        )
        q.add_argument("run_id")
        q.add_argument("--json", action="store_true", help="print the plan document itself (as stored)")
        q.set_defaults(func=run_plan, step=step)


def run_plan(args: argparse.Namespace) -> int:
    from services.runtime.bundle import BundleStore
    from services.runtime.settings import RuntimeSettings

    return show_plan(BundleStore(RuntimeSettings().bundle_root), args.step, args.run_id,
                     as_json=args.json, out=sys.stdout)


def show_plan(bundle: BundleStore, step: str, run_id: str, *, as_json: bool, out: TextIO) -> int:
    from services.runtime.approval import covers, pre_approved
    from services.runtime.bundle import ArtifactMissing, BundleError, InvalidPath

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
    if as_json:
        out.write(json.dumps(plan, indent=2, sort_keys=True) + "\n")
        return 0
    approvals = [approval for approval in _approvals(bundle, run_id) if covers(approval, ref)]
    pre = pre_approved(_campaign(bundle, run_id), step)
    out.write(f"{step} plan of run {run_id}\n  file: {bundle.resolve(ref.uri)}\n  sha256: {ref.sha256}\n")
    if pre:
        out.write(f"  approval: pre-approved by the campaign's policy (review.pre_approve lists {step}, with "
                  "acknowledgements.i_understand_this_mutates_cluster); it runs once stored and announced\n")
    elif approvals:
        out.write(f"  approval: covered by run.approved {approvals[-1].event_id} ({approvals[-1].approved_by})\n")
    else:
        out.write(f"  approval: none yet; run `specdec approve {run_id} --i-understand-this-mutates-cluster`\n")
    out.write(render(plan))
    return 0


def _campaign(bundle: BundleStore, run_id: str) -> Campaign:
    from pydantic import ValidationError

    from contracts.campaign import Campaign
    from services.runtime.bundle import BundleError
    from services.runtime.bundle_records import CAMPAIGN_RELPATH

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


def render(plan: Any, indent: int = 1) -> str:
    """The plan as indented text; an argv (a list of strings) as one shell-quoted
    line so that it reads as it would be typed (it is executed as a list, no shell)."""
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(plan, dict):
        for key, value in plan.items():
            if _is_argv(value) and key.endswith(("argv", "_cmd", "command")):
                lines.append(f"{pad}{key}: {shlex.join(value)}\n")
            elif isinstance(value, (dict, list)) and value:
                lines.append(f"{pad}{key}:\n{render(value, indent + 1)}")
            else:
                lines.append(f"{pad}{key}: {json.dumps(value)}\n")
    elif isinstance(plan, list):
        for item in plan:
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}-\n{render(item, indent + 1)}")
            else:
                lines.append(f"{pad}- {item if isinstance(item, str) else json.dumps(item)}\n")
    else:
        lines.append(f"{pad}{json.dumps(plan)}\n")
    return "".join(lines)


def _is_argv(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(token, str) for token in value)
