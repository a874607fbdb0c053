"""The observables a campaign field must change: what each consumer does with a
campaign, as data. Pure planners first (bench and training plans, the serve
argv, the runner's load and identity); real consumers only where no planner
exists (profiler, corpus, capacity check with recorded scheduler outputs)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from unittest import mock

import orjson

from contracts.campaign import Campaign
from contracts.events import ProfileRequested, ReportRendered
from services.runtime.errors import SpecdecError
from services.shared.capacity import kubernetes, slurm
from services.shared.scheduler.runner import RunResult
from tests.unit.guard.context import INPUTS, PATHS, RUN, SCHEDULER_OUTPUTS, Ctx, ref


@dataclass(frozen=True)
class Refused:
    """A consumer refused the campaign: an outcome too (the step fails with this reason)."""

    error: str
    message: str


def outcome(fn, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except SpecdecError as exc:
        return Refused(type(exc).__name__, str(exc))


# --- bench-runner ------------------------------------------------------------------------------


def _bench_plan(ctx: Ctx, c: Campaign):
    from services.bench.plan import build_plan
    from services.bench.planning import load_matrix

    return build_plan(c, load_matrix(c), run_id=RUN, default_node="node-a", training_output="/drafts/trained",
                      prompts={"source": "bench/prompts.jsonl"}, run_dir=PATHS.run_dir, cwd=PATHS.cwd)


def bench_plan(ctx: Ctx, c: Campaign) -> Any:
    """The whole plan: every command, placement, order and cleanup the approval names."""
    plan = outcome(_bench_plan, ctx, c)
    return plan if isinstance(plan, Refused) else plan.model_dump(mode="json")


def serve_argvs(ctx: Ctx, c: Campaign) -> Any:
    """The argv each cell's server is launched with."""
    plan = outcome(_bench_plan, ctx, c)
    return plan if isinstance(plan, Refused) else {cell.cell_id: cell.serve_argv for cell in plan.cells}


def trial_identities(ctx: Ctx, c: Campaign) -> Any:
    """The identity every trial result of each cell carries."""
    from services.bench.run import _identity

    plan = outcome(_bench_plan, ctx, c)
    if isinstance(plan, Refused):
        return plan
    baseline = next(cell.cell_id for cell in plan.cells if cell.role == "standing")
    return [_identity(cell, concurrency=cell.concurrency[0], trial=0, baseline=baseline).model_dump(mode="json")
            for cell in plan.cells]


def load_specs(ctx: Ctx, c: Campaign) -> Any:
    """How the runner's load generator drives each cell's first measured window."""
    from services.bench.run import _window_spec

    plan = outcome(_bench_plan, ctx, c)
    if isinstance(plan, Refused):
        return plan
    return [_window_spec(plan, cell, "http://127.0.0.1:8000", cell.concurrency[0], 0).model_dump(mode="json")
            for cell in plan.cells]


def prompts(ctx: Ctx, c: Campaign) -> Any:
    """The prompts every measured window sends (bench/prompts.jsonl)."""
    from contracts.events import BenchRequested
    from services.bench.planning import build_prompts, load_matrix

    request = BenchRequested(run_id=RUN, producer="guard", requested_by="guard")
    return [p.model_dump(mode="json") for p in build_prompts(ctx.bundle, c, load_matrix(c), request)]


# --- trainer-proxy -----------------------------------------------------------------------------


def training_plan(ctx: Ctx, c: Campaign) -> Any:
    from services.trainer_proxy.plan import build_plan

    plan = outcome(build_plan, c, run_id=RUN, node="node-a", scheduler=c.capacity.scheduler, paths=PATHS, inputs=INPUTS)
    return plan if isinstance(plan, Refused) else plan.model_dump(mode="json")


# --- capacity ----------------------------------------------------------------------------------


class _Recorded:
    """Answers the scheduler's read commands from recorded outputs; the idle check exits 0."""

    def __init__(self, selectors: dict[str, str]) -> None:
        read = lambda name: (SCHEDULER_OUTPUTS / name).read_text()  # noqa: E731
        self.outputs = {
            tuple(slurm.sinfo_argv(selectors)): read("sinfo.txt"),
            tuple(slurm.squeue_argv(selectors)): read("squeue.txt"),
            tuple(kubernetes.nodes_argv(selectors)): read("kubectl-get-nodes.json"),
            tuple(kubernetes.pods_argv()): read("kubectl-get-pods-A.json"),
        }
        self.calls: list[list[str]] = []

    def __call__(self, argv, *, timeout_s: float) -> RunResult:
        argv = [str(a) for a in argv]
        self.calls.append(argv)
        stdout = self.outputs.get(tuple(argv), "")
        return RunResult(argv=tuple(argv), exit_code=0, stdout=stdout, stderr="", duration_s=0.01)


def capacity_check(ctx: Ctx, c: Campaign) -> Any:
    """The commands the capacity check runs and the node it selects."""
    from services.shared.capacity.check import check_node

    runner = _Recorded(c.capacity.selectors)
    verdict = outcome(check_node, c.capacity, None, run_id=RUN, runner=runner)
    return runner.calls, verdict if isinstance(verdict, Refused) else verdict.node


# --- profiler and corpus (real consumers on a bundle of their own) ----------------------------


def profile(ctx: Ctx, c: Campaign) -> Any:
    from services.profiler.app import run_profile

    bundle = ctx.fresh_bundle()
    bundle.write_json(RUN, "campaign.json", c)
    event = ProfileRequested(run_id=RUN, producer="guard", requested_by="guard")
    done = outcome(run_profile, bundle, event, "profiler/guard")
    return done if isinstance(done, Refused) else orjson.loads(bundle.read_bytes(RUN, "profile/PROFILE.json"))


def corpus(ctx: Ctx, c: Campaign) -> Any:
    from services.corpus.app import run_corpus

    bundle = ctx.fresh_bundle()
    bundle.write_json(RUN, "campaign.json", c)
    bundle.write_bytes(RUN, "profile/PROFILE.json", ctx.profile)
    event = ProfileRequested(run_id=RUN, producer="guard", requested_by="guard")
    done = outcome(run_corpus, bundle, event, "corpus/guard")
    return done if isinstance(done, Refused) else bundle.read_bytes(RUN, "corpus/CORPUS.jsonl")


# --- gate, publisher, approval, report --------------------------------------------------------


def gate_decision(ctx: Ctx, c: Campaign) -> Any:
    """The decision on fixed trials, without the spec it echoes: only what the spec changed in it."""
    from services.gate import decide

    decision = outcome(decide, ctx.gate_baseline, ctx.gate_candidates, c.gate)
    if isinstance(decision, Refused):
        return decision
    data = decision.model_dump(mode="json")
    return {k: v for k, v in data.items() if k not in ("gate", "thresholds")}


def publish_call(ctx: Ctx, c: Campaign) -> Any:
    """Where the publisher sends the report and whether it is live (its transport has its own tests)."""
    from services.publisher import app
    from services.publisher.publish import mode

    calls: list[dict[str, Any]] = []

    async def spy(bundle, run_id, *, target, key, acknowledged_by, **_):
        dry_run, _why = mode(acknowledged_by, force_dry_run=False)
        calls.append({"target": target, "acknowledged_by": acknowledged_by, "dry_run": dry_run})
        return mock.Mock(target=target, dry_run=dry_run, files=[], response=None)

    event = ReportRendered(run_id=RUN, producer="guard", markdown=ref("report/report.md"),
                           html=ref("report/report.html"), draft=False)
    with mock.patch.object(app, "publish_run", spy):
        asyncio.run(app.publish_for(ctx.bundle, event, c, producer="publisher/guard"))
    return calls


def approval(ctx: Ctx, c: Campaign) -> Any:
    """Whether the services run their plans at once (pre-approved) or wait for `specdec approve`."""
    from services.runtime.approval import pre_approved

    return pre_approved(c)


def report(ctx: Ctx, c: Campaign) -> Any:
    """The rendered report's text (the summary names family and source revisions)."""
    from services.publisher.model import CampaignData
    from services.publisher.render import render_report

    data = CampaignData(run_id=RUN, campaign=c, decision=None, decision_sha256=None, plan=None, steps=[],
                        journal_present=False, arms=[], bench_exploratory=False, failed_cells={}, problems=[])
    return render_report(data).markdown
