"""The review point as one mechanism: plan -> approve -> execute (docs/design.md#the-review-point).

A step that changes the cluster gives `Reviewed` how to plan, announce and execute, and gets its routes
back; its app.py then only translates messages. The plan is always stored and announced first; the
plan's sha256 is the approval's step key, so one approval runs a plan once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from contracts.campaign import Campaign
from contracts.envelope import ArtifactRef, Event
from contracts.events import RunApproved
from services.runtime.approval import announced, approval_step_key, covers, pre_approved, stored_plan
from services.runtime.bundle.bundle import BundleError, BundleStore
from services.runtime.campaign import load_campaign
from services.runtime.delivery.consumer import Route, StepContext, StepKeyFn
from services.runtime.errors import StepFailed

P = TypeVar("P", bound=BaseModel)

Planner = Callable[[Campaign, Event], tuple[P, ArtifactRef]]
Announcer = Callable[[Event, P, ArtifactRef, str], Event]
P_contra = TypeVar("P_contra", bound=BaseModel, contravariant=True)


class Executor(Protocol[P_contra]):
    """Runs an approved (or pre-approved) plan; the step's context is passed by name."""

    def __call__(
        self, campaign: Campaign, plan: P_contra, ref: ArtifactRef, event: Event, *, ctx: StepContext
    ) -> Awaitable[Sequence[Event]]: ...

Skipper = Callable[[Campaign, Event, str], Sequence[Event] | None]


def per_event(event: Event) -> str:
    """Step key of a trigger that plans again on every new event (requests, re-selections)."""
    return event.event_id


def once_per_run(event: Event) -> str:
    """Step key of a trigger that plans once per run (the consumer's default)."""
    return "step"


@dataclass(frozen=True)
class Reviewed(Generic[P]):
    """One reviewed step: where its plan lives and how it plans, announces and executes."""

    bundle: BundleStore
    step: str  # the step whose `<step>.failed` a failure becomes ("training", "bench")
    service: str  # the producing service's name (events carry `<service>/<instance>`)
    plan_path: str  # contracts.layout.PLAN_PATHS[step]
    plan_model: type[P]  # re-reads the stored plan, hash-checked, before executing
    planned_schema: str  # `<step>.planned`: a redelivered trigger announces its plan once
    plan: Planner[P]  # builds and stores the plan; synchronous, run off the event loop
    announce: Announcer[P]  # the `<step>.planned` event for a stored plan
    execute: Executor[P]  # runs an approved (or pre-approved) plan
    skip: Skipper | None = None  # events that end the step without a plan, or None to plan
    # The schemas that complete the step (services/runtime/delivery/adopt.py); a plan awaiting approval is not one.
    outputs: tuple[str, ...] = ()

    def producer(self, ctx: StepContext) -> str:
        return f"{self.service}/{ctx.settings.instance}"

    async def on_trigger(self, event: Event, ctx: StepContext) -> list[Event]:
        campaign = load_campaign(self.bundle, event.run_id)
        if self.skip is not None:
            skipped = self.skip(campaign, event, self.producer(ctx))
            if skipped is not None:
                return list(skipped)
        # Planning reads and hashes files (and may import vLLM): seconds of synchronous
        # work, kept off the event loop so the lease heartbeat and the broker keep running.
        plan, ref = await asyncio.to_thread(self.plan, campaign, event)
        planned = self.announce(event, plan, ref, self.producer(ctx))
        again = announced(self.bundle, event.run_id, self.planned_schema, ref)
        if not pre_approved(campaign, self.step):
            ctx.log.info(f"{self.step} planned; waiting for an approval of its sha256 (`specdec approve`)",
                         plan_sha256=ref.sha256)
            return [] if again else [planned]
        if not again:
            await ctx.emit(planned)
        ctx.log.info(f"{self.step} planned; the campaign's review.pre_approve names {self.step}, so it runs now",
                     plan_sha256=ref.sha256)
        return list(await self.execute(campaign, plan, ref, event, ctx=ctx))

    async def on_approved(self, event: Event, ctx: StepContext) -> list[Event]:
        ref = stored_plan(self.bundle, event.run_id, self.plan_path)
        if ref is None or not isinstance(event, RunApproved) or not covers(event, ref):
            ctx.log.info(f"approval does not cover the {self.step} plan; nothing runs",
                         plan_sha256=ref.sha256 if ref else None)
            return []
        campaign = load_campaign(self.bundle, event.run_id)
        if pre_approved(campaign, self.step):
            ctx.log.info("the campaign's review.pre_approve pre-approved this plan; it ran at its trigger")
            return []
        try:
            # read_json re-hashes the bytes: a plan changed after approval never runs.
            plan = self.plan_model.model_validate(self.bundle.read_json(event.run_id, self.plan_path))
        except (BundleError, ValidationError) as exc:
            raise StepFailed(
                f"the approved plan {ref.uri} cannot be trusted: {exc}", error_type="PlanCorrupt"
            ) from None
        return list(await self.execute(campaign, plan, ref, event, ctx=ctx))

    def routes(self, triggers: Sequence[tuple[str, StepKeyFn]]) -> list[Route]:
        """The step's routes: each trigger schema with its step key, and run.approved."""
        return [
            *(Route(schema, self.on_trigger, step_key=key, failure_step=self.step, outputs=self.outputs)
              for schema, key in triggers),
            Route(RunApproved.SCHEMA, self.on_approved, step_key=approval_step_key(self.bundle, self.plan_path),
                  failure_step=self.step, outputs=self.outputs),
        ]
