"""Publisher entrypoint: render on `gate.decided` / `report.requested`, publish on `report.rendered` /
`publish.requested`.

Each event is its own step (step key = event ID): a new request renders or publishes again, a redelivered
one does not. To an external target the service always makes and records the dry run first, and goes live
only under the campaign's pre-approval policy for a final report; a DRAFT stays a dry run here, never an
error (docs/publisher.md, docs/lake.md, "The review point")."""

from __future__ import annotations

import asyncio

from contracts.campaign import Campaign
from contracts.catalogue import PUBLISHER
from contracts.envelope import Event
from contracts.events import ReportPublished, ReportRendered
from services.publisher.errors import PublishFailed
from services.publisher.pipeline import render_run
from services.publisher.publish.publish import Acknowledger, publish_run
from services.runtime.bundle.bundle import BundleStore
from services.runtime.campaign import load_campaign
from services.runtime.delivery.route import Route, StepContext
from services.runtime.errors import StepFailed
from services.runtime.resources import Resources
from services.runtime.settings import RuntimeSettings

NAME = PUBLISHER


# What completes each step (services/runtime/delivery/adopt.py): recorded in the bundle per triggering
# event, re-emitted instead of re-run; a new request is a new event and runs again.
RENDERED = ("report.rendered",)
PUBLISHED = ("report.published",)


def _by_event(event: Event) -> str:
    return event.event_id


def _no_inputs(event: Event) -> None:
    inputs = getattr(event, "inputs", None)
    if inputs:
        raise StepFailed(
            f"{event.SCHEMA} takes no inputs (got {sorted(inputs)}): the publisher renders and publishes from the "
            "run's own bundle",
            error_type="UnexpectedInputs",
        )


def render_event(bundle: BundleStore, event: Event, producer: str) -> ReportRendered:
    _no_inputs(event)
    extra = [event.model_dump(mode="json", by_alias=True)] if event.SCHEMA == "gate.decided" else []
    # A bundle that cannot be read is the step's failure (services/runtime/errors.py): no re-wrap here.
    outcome = render_run(bundle, event.run_id, extra_events=extra)
    return event.caused(ReportRendered, producer=producer, markdown=outcome.markdown, html=outcome.html,
                        draft=outcome.summary.draft)


async def publish_event(
    bundle: BundleStore, event: Event, producer: str, settings: RuntimeSettings | None = None
) -> ReportPublished:
    _no_inputs(event)
    # The publish target and the acknowledgement come from the campaign: without one, nothing is sent.
    return await publish_for(bundle, event, load_campaign(bundle, event.run_id), producer, settings=settings)


async def publish_for(
    bundle: BundleStore, event: Event, campaign: Campaign, producer: str, *, settings: RuntimeSettings | None = None
) -> ReportPublished:
    """Publish to the campaign's target; live only when the campaign carries the acknowledgement (and,
    for an external target, its review.pre_approve lists publish: from the dry run made first, for a
    final report)."""
    acknowledged = campaign.acknowledgements.i_understand_this_publishes_externally
    # The contract accepts publish in review.pre_approve only beside the acknowledgement and an external target.
    by: Acknowledger | None = None
    if acknowledged:
        by = "policy" if "publish" in campaign.review.pre_approve else "campaign"
    try:
        publication = await publish_run(
            bundle, event.run_id, target=campaign.publish.target, key=f"ev-{event.event_id}",
            acknowledged_by=by, settings=settings,
        )
    except PublishFailed as exc:
        raise StepFailed(exc.reason, error_type="PublishFailed",
                         artifacts=[exc.recorded] if exc.recorded else []) from None
    return event.caused(
        ReportPublished, producer=producer, target=publication.target, dry_run=publication.dry_run,
        sent=[f.ref for f in publication.files], response=publication.response,
    )


def routes(resources: Resources) -> list[Route]:
    bundle = resources.bundle

    async def render(event: Event, ctx: StepContext) -> list[Event]:
        # Plots take a second or two of CPU: off the event loop, so the lease heartbeat keeps running.
        return [await asyncio.to_thread(render_event, bundle, event, f"{NAME}/{ctx.settings.instance}")]

    async def publish(event: Event, ctx: StepContext) -> list[Event]:
        return [await publish_event(bundle, event, f"{NAME}/{ctx.settings.instance}", ctx.settings)]

    return [
        Route("gate.decided", render, step_key=_by_event, failure_step="report", outputs=RENDERED),
        Route("report.requested", render, step_key=_by_event, failure_step="report", outputs=RENDERED),
        Route("report.rendered", publish, step_key=_by_event, failure_step="publish", outputs=PUBLISHED),
        Route("publish.requested", publish, step_key=_by_event, failure_step="publish", outputs=PUBLISHED),
    ]
