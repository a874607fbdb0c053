"""Trainer-proxy entrypoint: plan the training, wait for its approval, run it (docs/trainer-proxy.md).

Routes: `capacity.selected` and `training.requested` plan (or record training as skipped, or plan the
reuse of an earlier run's identical draft); `run.approved` runs the stored plan it covers. Every failure
is `training.failed`. Only translation lives here: the review point is services/runtime/review.py.
"""

from __future__ import annotations

from functools import partial

from contracts import layout
from contracts.campaign import Campaign
from contracts.catalogue import TRAINER
from contracts.envelope import ArtifactRef, Event
from contracts.events import CapacitySelected, TrainingCompleted, TrainingPlanned, TrainingRequested
from services.runtime.delivery.route import Route, StepContext
from services.runtime.resources import Resources
from services.runtime.review import Reviewed, per_event
from services.shared.capacity.recheck import RecheckFn
from services.shared.capacity.recheck import recheck as capacity_recheck
from services.trainer_proxy.execution.execute import Approved, execute
from services.trainer_proxy.planning.model import TrainingPlan
from services.trainer_proxy.planning.staging import plan_training, skipped

NAME = TRAINER
STEP = "training"


def announce(event: Event, plan: TrainingPlan, ref: ArtifactRef, producer: str) -> Event:
    return event.caused(TrainingPlanned, producer=producer, plan=ref, executor=plan.executor, node=plan.node)


def routes(resources: Resources) -> list[Route]:
    bundle = resources.bundle
    # Tests may attach their own pre-launch check; production repeats the capacity check.
    recheck: RecheckFn = resources.training_recheck or partial(capacity_recheck, folder=layout.TRAINING_RECHECK_DIR)

    async def run(
        campaign: Campaign, plan: TrainingPlan, ref: ArtifactRef, event: Event, *, ctx: StepContext
    ) -> list[Event]:
        return [await execute(bundle, Approved(plan=plan, ref=ref, campaign=campaign), event, ctx, recheck=recheck)]

    review = Reviewed(
        bundle=bundle, step=STEP, service=NAME, plan_path=layout.TRAINING_PLAN, plan_model=TrainingPlan,
        planned_schema=TrainingPlanned.SCHEMA, plan=partial(plan_training, bundle), announce=announce, execute=run,
        skip=partial(skipped, bundle), outputs=(TrainingCompleted.SCHEMA,),
    )
    return review.routes([(CapacitySelected.SCHEMA, per_event), (TrainingRequested.SCHEMA, per_event)])
