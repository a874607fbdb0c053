"""The MCP tools: thin calls to the functions the CLI calls, with typed, described inputs and outputs.

Every tool, before it does anything: refuses an acknowledgement-looking token inside
any string argument (contracts/argv.py, as the CLI refuses one inside an argv; the
acknowledgements are the typed boolean arguments), and, when it mutates, checks the
HTTP bearer token (auth.py). A SpecdecError or an invalid input becomes an MCP tool
error carrying the CLI's message.
"""

from __future__ import annotations

import functools
import io
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from contracts import layout
from contracts.argv import check_token
from contracts.campaign import REVIEWED_STEPS, Campaign, GateSpec
from contracts.catalogue import PLAN_PATHS
from contracts.decision import Decision
from contracts.events import CampaignSubmitted, RunApproved
from services.cli import ops, plan_cmd, submit
from services.cli.progress import RunStatus, run_status
from services.mcp import offline
from services.mcp.deps import Deps
from services.mcp.models import (
    Approval,
    CampaignRunResult,
    CampaignStored,
    PlanShown,
    PlanView,
    RenderedReport,
    RunCreated,
)
from services.publisher.outbox import DraftOverride
from services.publisher.publish import Publication
from services.runtime.approval import pre_approved
from services.runtime.bundle import ArtifactMissing, BundleStore
from services.runtime.campaign import load_campaign
from services.runtime.errors import ConfigurationError, SpecdecError

RunIdArg = Annotated[str, Field(description="The run ID (evidence_init or campaign_init returned it).")]
PlanHashes = Annotated[list[str] | None, Field(
    description="sha256 of each plan to approve and run, as campaign_run, plan_show or campaign_status showed them.")]
_FAMILY_PATTERN = next(m.pattern for m in Campaign.model_fields["family"].metadata if getattr(m, "pattern", None))
_POLL_S = 0.5


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, BaseModel):
        yield from _strings(value.model_dump(mode="json"))
    elif isinstance(value, dict):
        for item in value.values():  # the keys are argument and field names
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def refuse_ack_tokens(arguments: dict[str, Any]) -> None:
    """The CLI's refusal of an acknowledgement-looking token (contracts/argv.check_token), on every string
    argument; braces are escaped first so that only the acknowledgement rule applies, not the placeholder one."""
    for text in _strings(arguments):
        check_token(text.replace("{", "{{").replace("}", "}}"))


def invalid_input(exc: ValidationError) -> str:
    """The CLI's wording of a validation error (services/cli/main.py)."""
    problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())
    return f"invalid input: {problems}"


class _Tools:
    def __init__(self, server: MCPServer, deps: Deps) -> None:
        self.server, self.deps = server, deps

    def add(self, *, mutates: bool, destructive: bool = False, external: bool = False
            ) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
        def register(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
            @functools.wraps(fn)
            async def call(*args: Any, **kwargs: Any) -> Any:
                try:
                    if mutates:  # first: a caller without the token learns nothing of the arguments' fate
                        ctx = kwargs.get("ctx")
                        self.deps.guard.check(ctx.headers if ctx is not None else None, fn.__name__)
                    refuse_ack_tokens({k: v for k, v in kwargs.items() if k != "ctx"})
                    return await fn(*args, **kwargs)
                except SpecdecError as exc:
                    raise ToolError(str(exc)) from None
                except ValidationError as exc:
                    raise ToolError(invalid_input(exc)) from None

            hints = ToolAnnotations(read_only_hint=not mutates, destructive_hint=destructive, open_world_hint=external)
            self.server.add_tool(call, annotations=hints)
            return call

        return register


def _stored_campaign(bundle: BundleStore, run_id: str) -> Campaign:
    submit.check_run_id(run_id)
    try:
        bundle.ref(run_id, layout.CAMPAIGN)
    except ArtifactMissing:
        raise ConfigurationError(f"run {run_id} holds no campaign: store one with campaign_init first") from None
    return load_campaign(bundle, run_id)


def _plans(bundle: BundleStore, run_id: str, events: list[dict[str, Any]]) -> list[PlanView]:
    approved = {sha for e in events if e.get("schema") == RunApproved.SCHEMA for sha in e.get("plan_sha256s", [])}
    views: dict[str, PlanView] = {}  # by hash: a redelivered trigger may announce one plan twice
    for event in sorted((e for e in events if e.get("schema") in ops.PLANNED), key=lambda e: str(e.get("produced_at"))):
        step, sha = event["schema"].split(".")[0], event["plan"]["sha256"]
        document = bundle.read_json(run_id, PLAN_PATHS[step])  # hash-checked: a changed plan is refused
        views.setdefault(sha, PlanView(step=step, event_id=event["event_id"], uri=event["plan"]["uri"], sha256=sha,
                                       approved=sha in approved, document=document))
    return list(views.values())


async def _wait_for_review(cli: Any, run_id: str, wait_s: float) -> list[dict[str, Any]]:
    """The run's events once a plan waits for approval or the run halted, or after `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        events = await ops.journal(cli, run_id)
        state = run_status(run_id, events)
        stopped = state.halted or any(s.state == "unavailable" for s in state.steps)
        if ops.pending_plans(events) or stopped or time.monotonic() >= deadline:
            return events
        await anyio.sleep(_POLL_S)


def register(server: MCPServer, deps: Deps) -> None:
    tool = _Tools(server, deps).add
    bundle = deps.bundle

    @tool(mutates=True)
    async def evidence_init(
        ctx: Context,
        family: Annotated[str, Field(description="Model family label (the campaign's `family`); a generated run ID "
                                     "starts with it.", pattern=_FAMILY_PATTERN)],
        experiment_id: Annotated[str | None, Field(description="A run ID the caller already uses (3-63 of a-z, 0-9, "
                                                   "'-', alphanumeric at both ends; not in use); generated if absent.")
                                 ] = None,
    ) -> RunCreated:
        """Create a run and its empty evidence bundle; publishes nothing. Next: campaign_init."""
        async with deps.connect() as cli:
            run_id = await submit.create_run(cli, family, experiment_id)
        return RunCreated(run_id=run_id, bundle_path=str(bundle.run_dir(run_id).absolute()),
                          next_step=f"campaign_init(config=..., experiment_id={run_id!r}, family={family!r})")

    @tool(mutates=True)
    async def campaign_init(
        ctx: Context,
        config: Annotated[str, Field(description="Path of the campaign YAML (the whole campaign, as `specdec submit` "
                                     "takes it); relative paths in it resolve from the server's working directory.")],
        experiment_id: Annotated[str, Field(description="The run to store it in: one evidence_init created, or a new "
                                            "run ID (checked, refused when in use).")],
        family: Annotated[str, Field(description="The campaign's family; a campaign of another family is refused.")],
        evidence_bundle: Annotated[str | None, Field(description="The run's bundle folder, when the caller names it: "
                                                     "must be <bundle root>/<experiment_id> under the services' "
                                                     "bundle root.")] = None,
    ) -> CampaignStored:
        """Validate the campaign file (every problem at once, as `specdec submit`) and store it, the operator's
        commands and the source revisions in the run's bundle; publishes nothing. Next: campaign_run (a dry run)."""
        run_id = submit.check_run_id(experiment_id)
        if evidence_bundle is not None:
            _check_bundle_path(deps, run_id, Path(evidence_bundle))
        prepared = submit.prepare_campaign(Path(config))
        if prepared.campaign.family != family:
            raise ConfigurationError(f"the campaign {config} is of family {prepared.campaign.family!r}, not "
                                     f"{family!r}: give its own family, or the campaign meant for {family!r}")
        async with deps.connect() as cli:
            run_id = await submit.open_run(cli, run_id)
            ref = submit.store_campaign(cli.bundle, run_id, prepared)
        pre = [step for step in REVIEWED_STEPS if pre_approved(prepared.campaign, step)]
        return CampaignStored(
            run_id=run_id, bundle_path=str(bundle.run_dir(run_id).absolute()), campaign=ref,
            artifacts=bundle.artifacts(run_id), inert=prepared.inert, pre_approved_steps=pre,
            next_step=f"campaign_run(run_id={run_id!r}) without the acknowledgement: a dry run that produces the plans",
        )

    @tool(mutates=True, destructive=True)
    async def campaign_run(
        ctx: Context,
        run_id: RunIdArg,
        i_understand_this_mutates_cluster: Annotated[bool, Field(
            description="Typed acknowledgement. false (default): a dry run, which publishes the campaign so that the "
            "steps that change nothing run and every plan is produced and stored, and executes none. true: approve "
            "the plans named in plan_sha256s, which the services then run.")] = False,
        plan_sha256s: PlanHashes = None,
        wait_for_plans_s: Annotated[float, Field(ge=0, le=600, description="Dry run: seconds to wait for the first "
                                                 "plan (or a halt) before returning what exists.")] = 60.0,
    ) -> CampaignRunResult:
        """Dry run by default: publish the stored campaign (once) and return its plans with their hashes, nothing
        executed. With the acknowledgement: approve the named plans, which then run."""
        campaign = _stored_campaign(bundle, run_id)
        pre = [step for step in REVIEWED_STEPS if pre_approved(campaign, step)]
        async with deps.connect() as cli:
            events = await ops.journal(cli, run_id)
            submitted = any(e.get("schema") == CampaignSubmitted.SCHEMA for e in events)
            published, approval = False, None
            if not i_understand_this_mutates_cluster:
                if pre:
                    raise ConfigurationError(
                        f"the campaign of run {run_id} pre-approves its {' and '.join(pre)} plan(s) (review.pre_approve): "
                        "publishing it would run them, so a dry run cannot be honoured; remove review.pre_approve "
                        "and store the campaign in a new run, or call campaign_run with "
                        "i_understand_this_mutates_cluster=true")
                if plan_sha256s:
                    raise ConfigurationError("plan_sha256s approves plans, which a dry run never does: drop them, or "
                                             "give i_understand_this_mutates_cluster=true")
                if not submitted:
                    await submit.publish_submitted(cli, run_id, campaign, bundle.ref(run_id, layout.CAMPAIGN))
                    published = True
                events = await _wait_for_review(cli, run_id, wait_for_plans_s)
            elif not submitted:
                if not pre:
                    raise ConfigurationError(
                        f"run {run_id} was not published yet, so it has no plan to approve: call campaign_run without "
                        "i_understand_this_mutates_cluster first (a dry run); it returns the plans and their sha256")
                await submit.publish_submitted(cli, run_id, campaign, bundle.ref(run_id, layout.CAMPAIGN))
                published = True
                events = await ops.journal(cli, run_id)
            else:
                approval = await ops.approve_plans(cli, run_id, plan_sha256s or [], acknowledged=True, out=io.StringIO())
                events = await ops.journal(cli, run_id)
        plans = _plans(bundle, run_id, events)
        waiting = [p for p in plans if not p.approved and p.step not in pre]
        next_step = (f"review the plans, then campaign_run(run_id={run_id!r}, i_understand_this_mutates_cluster=true, "
                     f"plan_sha256s=[...]) to run them" if waiting else f"campaign_status(run_id={run_id!r})")
        return CampaignRunResult(
            run_id=run_id, dry_run=not i_understand_this_mutates_cluster, published_submission=published,
            approved_sha256s=approval.plan_sha256s if approval else [],
            approval_event_id=approval.event_id if approval else None, plans=plans,
            status=run_status(run_id, events), next_step=next_step,
        )

    @tool(mutates=False)
    async def campaign_status(run_id: RunIdArg) -> RunStatus:
        """Each step's state for the run, as `specdec status RUN_ID --json` (halted: a step failed)."""
        async with deps.connect() as cli:
            return await ops.status(cli, run_id)

    @tool(mutates=False)
    async def plan_show(
        run_id: RunIdArg,
        step: Annotated[Literal["bench", "training"], Field(description="Which step's plan.")],
    ) -> PlanShown:
        """A stored plan, as `specdec <step> plan RUN_ID` prints it: every command, where, the cleanup, its sha256
        and whether an approval covers it; with the plan document."""
        text, doc = io.StringIO(), io.StringIO()
        plan_cmd.show_plan(bundle, step, run_id, as_json=False, out=text)
        plan_cmd.show_plan(bundle, step, run_id, as_json=True, out=doc)
        ref = bundle.ref(run_id, PLAN_PATHS[step])
        return PlanShown(run_id=run_id, step=step, uri=ref.uri, sha256=ref.sha256, text=text.getvalue(),
                         document=json.loads(doc.getvalue()))

    @tool(mutates=True, destructive=True)
    async def approve(
        ctx: Context,
        run_id: RunIdArg,
        i_understand_this_mutates_cluster: Annotated[bool, Field(
            description="Typed acknowledgement that the approved plans change the cluster; required.")] = False,
        plan_sha256s: PlanHashes = None,
    ) -> Approval:
        """Approve plans of the run, as `specdec approve`: the named ones, or every plan awaiting approval."""
        async with deps.connect() as cli:
            if plan_sha256s:
                event = await ops.approve_plans(cli, run_id, plan_sha256s, acknowledged=i_understand_this_mutates_cluster,
                                                out=io.StringIO())
            else:
                event = await ops.approve(cli, run_id, acknowledged=i_understand_this_mutates_cluster, out=io.StringIO())
        return Approval(run_id=run_id, event_id=event.event_id, plan_sha256s=event.plan_sha256s)

    @tool(mutates=False)
    async def gate(
        run_id: RunIdArg,
        spec: Annotated[GateSpec | None, Field(description="A gate spec to decide with instead of the campaign's "
                                               "(objective, floors, guards, min_trials).")] = None,
    ) -> Decision:
        """The gate's decision over the run's trial results in its bundle, offline (the gate's own `decide`, as
        `specdec gate`); writes nothing. The run's recorded decision is the resource bundle://RUN_ID/gate/DECISION.json."""
        return await anyio.to_thread.run_sync(lambda: offline.decide_run(bundle, run_id, spec))

    @tool(mutates=True)
    async def report_render(ctx: Context, run_id: RunIdArg) -> RenderedReport:
        """Render the run's report into its bundle, as `specdec report RUN_ID` (write-once: the same evidence gives
        the same bytes); the files are resources."""
        outcome = await anyio.to_thread.run_sync(lambda: offline.render(bundle, run_id))
        summary = outcome.summary
        return RenderedReport(run_id=run_id, files=outcome.refs, draft=summary.draft, draft_reasons=summary.draft_reasons,
                              plots=len(outcome.report.plots), next_lever=summary.levers[0] if summary.levers else "")

    @tool(mutates=True, external=True)
    async def publish_to_lake(
        ctx: Context,
        run_id: RunIdArg,
        target: Annotated[str | None, Field(description="file://DIR, s3://BUCKET/PREFIX or https://URL instead of the "
                                            "campaign's publish.target.")] = None,
        i_understand_this_publishes_externally: Annotated[bool, Field(
            description="Typed acknowledgement: send the report for real. Without it, a dry run: what would be sent "
            "where, nothing sent. s3:// and https:// are external: live needs a dry run of the same report there "
            "first.")] = False,
        draft_override: Annotated[DraftOverride | None, Field(
            description="The recorded decision to publish a DRAFT report to an external target anyway, with why.")
        ] = None,
    ) -> Publication:
        """Publish the run's rendered report (its files, evidence and manifest), as `specdec publish`: a dry run
        unless acknowledged; file:// writes a folder, s3:// and https:// send it off this machine."""
        return await offline.publish(bundle, deps.settings, run_id, target=target,
                                     live=i_understand_this_publishes_externally, draft_override=draft_override)


def _check_bundle_path(deps: Deps, run_id: str, given: Path) -> None:
    root = deps.settings.bundle_root.absolute().resolve()
    path = given.absolute().resolve()
    if not path.is_relative_to(root):
        raise ConfigurationError(f"evidence_bundle {given} is not under the services' bundle root {root} "
                                 "(SPECDEC_BUNDLE_ROOT): the services read and write bundles there only; leave it out, "
                                 f"or give {root / run_id}")
    if path != root / run_id:
        raise ConfigurationError(f"evidence_bundle {given} is not the bundle of run {run_id}, which is {root / run_id}")
