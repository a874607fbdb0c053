"""Publisher entrypoint.

- `gate.decided`, `report.requested` -> render the report from the bundle into
  `report/` (write-once) -> `report.rendered` (DRAFT flag, Markdown and HTML refs);
- `report.rendered`, `publish.requested` -> publish to the campaign's
  `publish.target`, a dry run unless the campaign acknowledges
  `i_understand_this_publishes_externally` (and, for an external target, lists
  `publish` in `review.pre_approve`) -> `report.published` (target, dry
  run or not, the hashes of the report's files that were or would be sent, the
  recorded response; the evidence files and the manifest hash are in
  `publish/<key>/publication.json`).

The campaign's acknowledgement and an external target (`s3://`, `https://`,
`http://`; services/publisher/publish/publish_review.py): the service always makes the dry run
first and records it (`publish/dry-run/<digest>.json`); it goes live from that
dry run only when the campaign's `review.pre_approve` lists `publish` (which needs
the acknowledgement) and the report is final. The acknowledgement alone leaves
it a dry run for a person to review and publish (`specdec publish ...
--i-understand-this-publishes-externally`); it is recorded as inert there. A DRAFT
stays a dry run here, never an error: a campaign carries no override, so a
DRAFT goes out only by a person's `specdec publish` with an explicit override
(or the MCP tool's). A `file://` target is not external: the acknowledgement
alone makes it live, DRAFT or not (its marking travels with it).

Failures the operator must act on become `report.failed` / `publish.failed`
with the reason: a PublisherError is a StepFailed and propagates as it is; a
bundle error (a corrupt or conflicting artifact) is permanent as in every step
(services/runtime/errors.py). Each event is its own step (step key = event
ID): a new request renders or publishes again, a redelivered one does not.
"""

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
from services.runtime.delivery.consumer import Route, StepContext
from services.runtime.errors import StepFailed
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
    return await publish_for(bundle, event, load_campaign(bundle, event.run_id), producer, settings)


async def publish_for(
    bundle: BundleStore, event: Event, campaign: Campaign, producer: str, settings: RuntimeSettings | None = None
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
        raise StepFailed(exc.reason, error_type="PublishFailed", artifacts=[exc.recorded] if exc.recorded else []) from None
    return event.caused(
        ReportPublished, producer=producer, target=publication.target, dry_run=publication.dry_run,
        sent=[f.ref for f in publication.files], response=publication.response,
    )


def routes(resources: dict) -> list[Route]:
    bundle: BundleStore = resources["bundle"]

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
