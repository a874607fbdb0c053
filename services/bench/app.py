"""Bench-runner entrypoint: training.completed / bench.requested -> bench.planned
-> [approval] -> bench.trial.completed ... -> bench.completed.

Only translation lives here: the review point (plan stored and announced, run
on an approval naming its sha256 or a campaign's pre-approval) is
services/runtime/review.py; planning is services/bench/planning/staging.py; running
the plan is services/bench/executors/execution.py.
"""

from __future__ import annotations

from functools import partial

from contracts import layout
from contracts.campaign import Campaign
from contracts.catalogue import BENCH
from contracts.envelope import ArtifactRef, Event
from contracts.events import BenchCompleted, BenchPlanned, BenchRequested, TrainingCompleted
from services.bench.executors.execution import execute
from services.bench.planning.model import BenchPlan
from services.bench.planning.staging import plan_bench
from services.runtime.delivery.route import Route, StepContext
from services.runtime.resources import Resources
from services.runtime.review import Reviewed, once_per_run, per_event

NAME = BENCH
STEP = "bench"


def announce(event: Event, plan: BenchPlan, ref: ArtifactRef, producer: str) -> Event:
    return event.caused(BenchPlanned, producer=producer, plan=ref, cells=[cell.cell_id for cell in plan.cells],
                        trials=plan.cap or max(cell.trials for cell in plan.cells))  # rounds: the cap


def routes(resources: Resources) -> list[Route]:
    bundle = resources.bundle

    async def run(campaign: Campaign, plan: BenchPlan, ref: ArtifactRef, event: Event, *,
                  ctx: StepContext) -> list[Event]:
        return await execute(bundle, campaign, plan, event, ctx=ctx, node_check=resources.bench_recheck)

    review = Reviewed(
        bundle=bundle, step=STEP, service=NAME, plan_path=layout.BENCH_PLAN, plan_model=BenchPlan,
        planned_schema=BenchPlanned.SCHEMA, plan=partial(plan_bench, bundle), announce=announce, execute=run,
        outputs=(BenchCompleted.SCHEMA,),
    )
    return review.routes([(TrainingCompleted.SCHEMA, once_per_run), (BenchRequested.SCHEMA, per_event)])
