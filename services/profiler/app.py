"""Profiler entrypoint: campaign.submitted / profile.requested -> profile.completed; corpus.completed ->
profile/SUFFIX_PREDICTION.json when the campaign has a suffix cell (no event).

Too many malformed traffic lines fail the step, the diagnosis kept as profile/PROFILE.rejected.json; a
suffix prediction that fails is written down as its reason, and the run goes on
(docs/profiler.md#in-a-campaigns-bundle)."""

from __future__ import annotations

from contracts import layout
from contracts.artifacts.suffix import SuffixPrediction
from contracts.campaign import TrafficFile
from contracts.catalogue import PROFILER
from contracts.envelope import Event
from contracts.events import CorpusCompleted, ProfileCompleted
from services.profiler.errors import TooManyRejected
from services.profiler.profile import profile_shapes, profile_traffic
from services.profiler.suffix_prediction import predict, suffix_cells
from services.runtime.bundle.bundle import BundleStore
from services.runtime.campaign import load_campaign
from services.runtime.delivery.route import Route, StepContext
from services.runtime.resources import Resources
from services.runtime.target import tokenizer_folder

NAME = PROFILER
# What completes the step (services/runtime/delivery/adopt.py): recorded in the bundle, re-emitted instead of re-run.
DONE_BY = (ProfileCompleted.SCHEMA,)


def run_profile(bundle: BundleStore, event: Event, producer: str) -> ProfileCompleted:
    campaign = load_campaign(bundle, event.run_id)
    try:
        if isinstance(campaign.traffic, TrafficFile):
            profile = profile_traffic(
                campaign.traffic.path,
                tokenizer_dir=tokenizer_folder(campaign),
                reject_threshold=campaign.traffic.reject_threshold,
            )
        else:
            profile = profile_shapes(campaign.traffic.shapes)
    except TooManyRejected as exc:
        # The diagnosis is kept, and `profile.failed` lists it.
        exc.artifacts = [bundle.write_json(event.run_id, layout.PROFILE_REJECTED, exc.profile)]
        raise
    ref = bundle.write_json(event.run_id, layout.PROFILE, profile)
    return event.caused(
        ProfileCompleted,
        producer=producer,
        profile=ref,
        source=profile.source,
        records_accepted=profile.records.accepted,
        records_rejected=profile.records.rejected,
        recommended_method=profile.recommended_method.method,
    )


def run_suffix_prediction(bundle: BundleStore, event: CorpusCompleted) -> None:
    """profile/SUFFIX_PREDICTION.json for the campaign's suffix cells (none: nothing is written). Advice beside
    the measured figures, never a step of the run: whatever goes wrong is written down as the reason, and the
    run goes on (services/profiler/suffix_prediction.py)."""
    campaign = load_campaign(bundle, event.run_id)
    if not suffix_cells(campaign):
        return
    try:
        corpus = bundle.read_bytes(event.run_id, layout.CORPUS) if event.corpus is not None else None
        prediction = predict(campaign, corpus, tokenizer_folder(campaign))
    except Exception as exc:  # noqa: BLE001 - a prediction that fails is a note in the report, not a failed run
        prediction = SuffixPrediction(package=None, tokens=None, cells=[],
                                      unavailable_reason=f"the simulation failed: {type(exc).__name__}: {exc}")
    if prediction is not None:
        bundle.write_json(event.run_id, layout.PROFILE_SUFFIX, prediction)


def routes(resources: Resources) -> list[Route]:
    bundle = resources.bundle

    async def suffix(event: Event, ctx: StepContext) -> list[Event]:
        import asyncio

        await asyncio.to_thread(run_suffix_prediction, bundle, event)  # type: ignore[arg-type]  # the route delivers corpus.completed
        return []

    async def handle(event: Event, ctx: StepContext) -> list[Event]:
        import asyncio

        # Profiling reads the whole file: off the event loop, so the lease heartbeat keeps running.
        return [await asyncio.to_thread(run_profile, bundle, event, f"{NAME}/{ctx.settings.instance}")]

    return [
        Route("campaign.submitted", handle, failure_step="profile", outputs=DONE_BY),
        Route("profile.requested", handle, step_key=lambda e: e.event_id, failure_step="profile", outputs=DONE_BY),
        # Emits nothing: the prediction is a file the report reads, and a redelivery writes the same bytes.
        Route("corpus.completed", suffix, failure_step="profile"),
    ]
