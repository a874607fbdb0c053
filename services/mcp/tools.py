"""The MCP tools: thin calls to the use cases (services/app), with typed, described inputs and outputs.

Before it does anything, every tool refuses an argument it does not declare (the SDK would drop it:
docs/design.md#principle-1-no-inert-configuration) and an acknowledgement-looking token in any string,
and a tool that mutates checks the bearer token again. A SpecdecError or an invalid input becomes an
MCP tool error carrying the use case's message (docs/mcp.md#refusals).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from contracts.argv import check_token
from contracts.artifacts.decision import Decision
from contracts.campaign import Campaign, GateSpec
from services.app.campaign.validate import Validation, validate
from services.app.results import CampaignRunResult, CampaignStored, RenderedReport, RunCreated
from services.app.runs import gate as gate_use_case
from services.app.runs import ops, plans, report
from services.app.runs.ops import Approved
from services.app.runs.progress import RunStatus
from services.app.workflow import verb_calls, verbs, workflow
from services.app.workflow.verbs import VerbResult
from services.mcp.deps import Deps
from services.mcp.models import PlanShown
from services.publisher.publish.outbox import DraftOverride
from services.publisher.publish.publish import Publication
from services.runtime.errors import ConfigurationError, SpecdecError, invalid_input

ArgsArg = Annotated[list[str] | None, Field(
    description="The workflow's call shape: the verb's command-line arguments, parsed as `specdec <verb>` parses them "
    "(`[\"--help\"]` returns its help). Acknowledgements are typed fields, never tokens here.")]
RunIdArg = Annotated[str, Field(description="The run ID (evidence_init or campaign_init returned it).")]
PlanHashes = Annotated[list[str] | None, Field(
    description="sha256 of each plan to approve and run, as campaign_run, plan_show or campaign_status showed them.")]
DRY_RUN_WAIT_S = 60.0  # campaign_run's wait for the first plan of a dry run when the caller names none
_FAMILY_PATTERN = next(m.pattern for m in Campaign.model_fields["family"].metadata if getattr(m, "pattern", None))


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


def strict(tool: Tool) -> Tool:
    """The tool with an argument model that refuses an undeclared argument by name, and an input schema that
    says so (`additionalProperties: false`). The SDK's own model ignores extra keys and calls the tool without
    them, so a misspelt or invented argument would succeed without a word."""
    base = tool.fn_metadata.arg_model
    declared = sorted(info.alias or name for name, info in base.model_fields.items())
    name = tool.name

    def known_only(cls: type[BaseModel], data: Any) -> Any:
        unknown = sorted(set(data) - set(declared)) if isinstance(data, dict) else []
        if unknown:
            raise ValueError(f"{name} takes no argument {', '.join(map(repr, unknown))}: its arguments are "
                             f"{', '.join(declared) or 'none'}; remove it (nothing was done)")
        return data

    model: type[BaseModel] = type(base.__name__, (base,), {
        "__module__": base.__module__,
        "model_config": ConfigDict(arbitrary_types_allowed=True, extra="forbid"),
        # A class built by type() hands pydantic the classmethod, as a class body would under the decorator.
        "_known_only": model_validator(mode="before")(
            classmethod(known_only)),  # type: ignore[arg-type]  # pydantic's stubs take the function itself
    })
    metadata = tool.fn_metadata.model_copy(update={"arg_model": model})
    fields = {key: getattr(tool, key) for key in type(tool).model_fields}
    return _OneLineTool.model_construct(**{**fields, "fn_metadata": metadata,
                                           "parameters": model.model_json_schema(by_alias=True)})


def _argument_problem(name: str, exc: ValidationError) -> str:
    """Arguments that fail the tool's model, in one line: a refusal the argument model words itself
    (an undeclared argument) as it is, anything else as every entry point words invalid input."""
    errors = exc.errors()
    own = [e["ctx"]["error"] for e in errors if e["type"] == "value_error" and not e["loc"] and "ctx" in e]
    return f"{name}: {own[0]}" if len(own) == len(errors) == 1 else f"{name}: {invalid_input(exc)}"


class _OneLineTool(Tool):
    """The SDK words an argument that fails validation as pydantic's multi-line report; a caller gets one line
    that says what to fix, as from every other entry point (docs/mcp.md#the-mcp-server-specdec-mcp)."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        try:
            return await super().run(arguments, context, convert_result)
        except ToolError as exc:
            if type(exc) is ToolError and isinstance(exc.__cause__, ValidationError):
                raise ToolError(_argument_problem(self.name, exc.__cause__)) from None
            raise


class _Tools:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.tools: list[Tool] = []

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
            self.tools.append(strict(Tool.from_function(call, annotations=hints)))
            return call

        return register


# evidence_init's family, kept for campaign_init's check when the caller chose the run ID (a generated ID
# carries the family in its name). A key beside the ledger's, not a bundle file: the bundle stays empty
# until campaign_init stores the campaign.
def family_key(prefix: str, run_id: str) -> str:
    return f"{prefix}:mcp:family:{run_id}"


async def _check_family(session: Any, run_id: str, family: str) -> None:
    recorded = await session.client.get(family_key(session.settings.stream_prefix, run_id))
    if recorded is None:
        return
    recorded = recorded.decode() if isinstance(recorded, bytes) else str(recorded)
    if recorded != family:
        raise ConfigurationError(
            f"run {run_id} was created by evidence_init for family {recorded!r}, not {family!r}: store a campaign "
            f"of family {recorded!r} in it, or create a new run for {family!r}; nothing was stored")


async def _family_consumed(session: Any, run_id: str) -> None:
    """The stored campaign now carries the family and is write-once: the key has done its work, and a run
    whose campaign is stored leaves nothing behind in Redis. (A run created and never given a campaign keeps
    its one short key until Redis loses it.)"""
    await session.client.delete(family_key(session.settings.stream_prefix, run_id))


def build(deps: Deps) -> list[Tool]:
    """The server's tools over the use cases, each strict (see `strict`)."""
    registry = _Tools(deps)
    tool = registry.add
    bundle = deps.bundle

    @tool(mutates=True)
    async def evidence_init(
        ctx: Context,
        family: Annotated[str | None, Field(description="Model family label (the campaign's `family`); a generated "
                                            "run ID starts with it. Required unless `args` is given.",
                                            pattern=_FAMILY_PATTERN)] = None,
        experiment_id: Annotated[str | None, Field(description="A run ID the caller already uses (3-63 of a-z, 0-9, "
                                                   "'-', alphanumeric at both ends; not in use); generated if absent. "
                                                   "Given, the family is kept for campaign_init, which refuses a "
                                                   "campaign of another family.")
                                 ] = None,
        args: ArgsArg = None,
    ) -> RunCreated:
        """Create one identity: a run (its ID is also the experiment ID, campaign ID, scheduler label and join key)
        and its evidence bundle; publishes nothing. Typed (family, experiment_id) or the workflow's call shape:
        args ["--family", F, "--intent", TEXT, "--run-id", ID] (the intent is stored in the bundle and shown in the
        report). Next: campaign_init, or perf_tune_report_campaign_init with args."""
        if args is not None:
            if family is not None or experiment_id is not None:
                raise ConfigurationError("evidence_init takes `args` or the typed family/experiment_id, not both: "
                                         "put --family and --run-id in args (nothing was done)")
            parsed = verbs.parse(verbs.EVIDENCE_INIT, args)
            if parsed.namespace is None:
                return RunCreated(run_id=None, bundle_path=None, next_step="call evidence_init with args",
                                  happened="printed the help", help=parsed.help)
            async with deps.connect() as session:
                created = await verb_calls.evidence_init(session, parsed.namespace)
                if parsed.namespace.run_id is not None:
                    assert created.run_id is not None  # evidence_init always names the run it creates
                    await session.client.set(family_key(deps.settings.stream_prefix, created.run_id),
                                             parsed.namespace.family)
                return created
        if family is None:
            raise ConfigurationError("evidence_init needs family (or the workflow's args with --family)")
        async with deps.connect() as session:
            created = await workflow.evidence_init(session, family, experiment_id)
            if experiment_id is not None:  # else the generated run ID starts with the family
                assert created.run_id is not None  # evidence_init always names the run it creates
                await session.client.set(family_key(deps.settings.stream_prefix, created.run_id), family)
            return created

    @tool(mutates=True)
    async def campaign_init(
        ctx: Context,
        *,
        config: Annotated[str, Field(description="Path of the campaign YAML (the whole campaign, as `specdec submit` "
                                     "takes it), under the server's roots (SPECDEC_MCP_ROOTS); relative paths in it "
                                     "resolve from the server's working directory.")],
        experiment_id: Annotated[str, Field(description="The run to store it in: one evidence_init created, or a new "
                                            "run ID (checked, refused when in use).")],
        family: Annotated[str, Field(description="The campaign's family; a campaign of another family is refused.")],
        evidence_bundle: Annotated[str | None, Field(description="The run's bundle folder, when the caller names it: "
                                                     "must be <bundle root>/<experiment_id> under the services' "
                                                     "bundle root.")] = None,
    ) -> CampaignStored:
        """Validate the campaign file (every problem at once, as `specdec submit`) and store it, the operator's
        commands and the source revisions in the run's bundle; publishes nothing. Next: campaign_run (a dry run)."""
        async with deps.connect() as session:
            await _check_family(session, experiment_id, family)
            stored = await workflow.campaign_init(
                session, Path(config), experiment_id, family,
                evidence_bundle=Path(evidence_bundle) if evidence_bundle is not None else None, roots=deps.roots,
            )
            await _family_consumed(session, experiment_id)
            return stored

    @tool(mutates=False)
    async def campaign_validate(
        config: Annotated[str, Field(description="Path of the campaign YAML, as `specdec validate` takes it, under the "
                                     "server's roots (SPECDEC_MCP_ROOTS); relative paths in it resolve from the "
                                     "server's working directory.")],
    ) -> Validation:
        """Every check campaign_init and `specdec submit` make, with no run created, nothing stored or published:
        the problems (all at once), warnings, inert fields and each cell's declared serving config, as
        `specdec validate --json`."""
        return await anyio.to_thread.run_sync(lambda: validate(Path(config), deps.roots))

    @tool(mutates=True, destructive=True)
    async def campaign_run(
        ctx: Context,
        *,
        run_id: RunIdArg,
        i_understand_this_mutates_cluster: Annotated[bool, Field(
            description="Typed acknowledgement. false (default): a dry run, which publishes the campaign so that the "
            "steps that change nothing run and every plan is produced and stored, and executes none. true: approve "
            "the plans named in plan_sha256s, which the services then run.")] = False,
        plan_sha256s: PlanHashes = None,
        wait_for_plans_s: Annotated[float | None, Field(ge=0, le=600, description="Dry run only: seconds to wait for "
                                                        "the first plan (or a halt) before returning what exists; "
                                                        f"{DRY_RUN_WAIT_S:g} when absent. Refused on a live call, "
                                                        "which waits for nothing.")] = None,
    ) -> CampaignRunResult:
        """Dry run by default: publish the stored campaign (once) and return its plans with their hashes, nothing
        executed. With the acknowledgement: approve the named plans, which then run."""
        if i_understand_this_mutates_cluster and wait_for_plans_s is not None:
            raise ConfigurationError(
                "wait_for_plans_s applies to a dry run only (it waits for the first plan): a live call approves plans "
                "and waits for nothing; drop wait_for_plans_s, or drop i_understand_this_mutates_cluster for a dry run")
        async with deps.connect() as session:
            return await workflow.campaign_run(
                session, run_id, acknowledged=i_understand_this_mutates_cluster, plan_sha256s=plan_sha256s,
                wait_for_plans_s=DRY_RUN_WAIT_S if wait_for_plans_s is None else wait_for_plans_s)

    @tool(mutates=True)
    async def perf_tune_report_campaign_init(ctx: Context, args: ArgsArg) -> VerbResult:
        """The workflow's campaign init: args ["--config", <matrix.yaml>, "--experiment-id", <run-id>, "--family", F,
        "--evidence-bundle", <bundle>]. Validates the campaign (canonical matrix or specdec's own; every problem at
        once) and stores it with the operator's commands and source revisions; publishes nothing."""
        parsed = verbs.parse(verbs.CAMPAIGN_INIT, args or [])
        if parsed.namespace is None:
            return _help(verbs.CAMPAIGN_INIT, parsed.help)
        async with deps.connect() as session:
            await _check_family(session, parsed.namespace.experiment_id, parsed.namespace.family)
            stored = await verb_calls.campaign_init(session, parsed.namespace, deps.roots)
            await _family_consumed(session, parsed.namespace.experiment_id)
            return stored

    @tool(mutates=True, destructive=True)
    async def perf_tune_report_campaign_run(
        ctx: Context,
        args: ArgsArg,
        i_understand_this_mutates_cluster: Annotated[bool, Field(
            description="Typed acknowledgement. false (default): a dry run, which produces and returns every plan with "
            "its sha256 and executes none. true: approve exactly the plans this run's preceding dry run returned.")
        ] = False,
    ) -> VerbResult:
        """The workflow's campaign run: args ["--config", <matrix.yaml>, "--campaign", <bundle or run-id>,
        "--dry-run"]. A dry run unless acknowledged with the typed field; never an acknowledgement inside args."""
        parsed = verbs.parse(verbs.CAMPAIGN_RUN, args or [])
        if parsed.namespace is None:
            return _help(verbs.CAMPAIGN_RUN, parsed.help)
        async with deps.connect() as session:
            return await verb_calls.campaign_run(session, parsed.namespace, roots=deps.roots,
                                                 acknowledged=i_understand_this_mutates_cluster)

    @tool(mutates=True, external=True)
    async def perf_tune_report_publish_to_lake(
        ctx: Context,
        args: ArgsArg,
        i_understand_this_publishes_externally: Annotated[bool, Field(
            description="Typed acknowledgement for this call: send the report for real. Without it, a dry run.")
        ] = False,
    ) -> VerbResult:
        """The workflow's publish: args ["--campaign", <bundle or run-id>, "--target", URL?, "--dry-run"?,
        "--publish-draft", REASON?]. A dry run first; live with the typed field (an external target needs that dry
        run of the same report first)."""
        parsed = verbs.parse(verbs.PUBLISH, args or [])
        if parsed.namespace is None:
            return _help(verbs.PUBLISH, parsed.help)
        async with deps.connect() as session:
            return await verb_calls.publish(
                session, parsed.namespace, acknowledged=i_understand_this_publishes_externally
            )

    @tool(mutates=False)
    async def campaign_status(run_id: RunIdArg) -> RunStatus:
        """Each step's state for the run, as `specdec status RUN_ID --json` (halted: a step failed)."""
        async with deps.connect() as session:
            return await ops.status(session, run_id)

    @tool(mutates=False)
    async def plan_show(
        run_id: RunIdArg,
        step: Annotated[Literal["bench", "training"], Field(description="Which step's plan.")],
    ) -> PlanShown:
        """A stored plan, as `specdec <step> plan RUN_ID` prints it: every command, where, the cleanup, its sha256
        and whether an approval covers it; with the plan document."""
        shown = plans.show_plan(bundle, step, run_id)
        return PlanShown(run_id=run_id, step=shown.step, uri=shown.uri, sha256=shown.sha256,
                         text=plans.describe(shown), document=shown.document)

    @tool(mutates=True, destructive=True)
    async def approve(
        ctx: Context,
        run_id: RunIdArg,
        i_understand_this_mutates_cluster: Annotated[bool, Field(
            description="Typed acknowledgement that the approved plans change the cluster; required.")] = False,
        plan_sha256s: PlanHashes = None,
    ) -> Approved:
        """Approve plans of the run, as `specdec approve`: the named ones, or every plan awaiting approval."""
        async with deps.connect() as session:
            if plan_sha256s:
                return await ops.approve_plans(session, run_id, plan_sha256s,
                                               acknowledged=i_understand_this_mutates_cluster)
            return await ops.approve(session, run_id, acknowledged=i_understand_this_mutates_cluster)

    @tool(mutates=False)
    async def gate(
        run_id: RunIdArg,
        spec: Annotated[GateSpec | None, Field(description="A gate spec to decide with instead of the campaign's "
                                               "(objective, floors, guards, min_trials).")] = None,
    ) -> Decision:
        """The gate's decision over the run's trial results in its bundle, offline (the gate's own `decide`, as
        `specdec gate`); writes nothing. The run's recorded decision is the resource bundle://RUN_ID/gate/DECISION.json."""
        return await anyio.to_thread.run_sync(lambda: gate_use_case.decide_run(bundle, run_id, spec))

    @tool(mutates=True)
    async def report_render(ctx: Context, run_id: RunIdArg) -> RenderedReport:
        """Render the run's report into its bundle, as `specdec report RUN_ID` (write-once: the same evidence gives
        the same bytes); the files are resources."""
        outcome = await anyio.to_thread.run_sync(lambda: report.render(bundle, run_id))
        summary = outcome.summary
        return RenderedReport(
            run_id=run_id,
            files=outcome.refs,
            draft=summary.draft,
            draft_reasons=summary.draft_reasons,
            plots=len(outcome.report.plots),
            next_lever=summary.levers[0] if summary.levers else "",
        )

    @tool(mutates=True, external=True)
    async def publish_to_lake(
        ctx: Context,
        *,
        run_id: RunIdArg,
        target: Annotated[str | None, Field(description="file://DIR, s3://BUCKET/PREFIX or https://URL instead of the "
                                            "campaign's publish.target; an https:// one only where the operator's "
                                            "settings allow (SPECDEC_PUBLISH_ALLOWED_TARGETS, docs/lake.md); "
                                            "refused otherwise, nothing sent.")] = None,
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
        return await report.publish(bundle, deps.settings, run_id, target=target,
                                    acknowledged_by="mcp" if i_understand_this_publishes_externally else None,
                                    draft_override=draft_override)

    return registry.tools


def _help(verb: str, text: str | None) -> VerbResult:
    return VerbResult(verb=verb, run_id=None, bundle=None, happened="printed the help", help=text,
                      next_step=f"call {verb} with args")
