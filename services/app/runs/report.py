"""The report and its publication, offline (no Redis): render into the bundle or a copy, publish.

The publisher's own functions (services/publisher), as the publisher service calls them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from contracts import layout
from contracts.artifacts.report import ReportSummary
from contracts.campaign import Campaign
from services.publisher.pipeline import RenderOutcome, render_copy, render_run
from services.publisher.publish.outbox import DraftOverride
from services.publisher.publish.publish import Publication, parse_target, publish_report
from services.publisher.report.render import RenderedReport
from services.runtime.bundle.bundle import ArtifactMissing, BundleStore
from services.runtime.errors import ConfigurationError
from services.runtime.settings import RuntimeSettings


def render(bundle: BundleStore, run_id: str) -> RenderOutcome:
    """Render the run's report into its bundle's report/ (write-once: the same evidence gives the same bytes)."""
    return render_run(bundle, run_id)


def render_elsewhere(bundle: BundleStore, run_id: str, out: Path) -> tuple[RenderedReport, ReportSummary, list[Path]]:
    """Render the run's report into `out`, leaving the bundle untouched: (report, summary, files written)."""
    return render_copy(bundle, run_id, out)


async def publish(bundle: BundleStore, settings: RuntimeSettings, run_id: str, *, target: str | None,
                  acknowledged_by: Literal["cli", "mcp"] | None, draft_override: DraftOverride | None,
                  dry_run: bool = False) -> Publication:
    """Publish the run's rendered report to `target` (the campaign's publish.target when None): a dry run unless
    `acknowledged_by` names who acknowledged (and `dry_run` is not set); an external target (s3://, https://)
    goes live only after a dry run of the same report to it (the publisher's review point,
    services/publisher/publish/publish_review.py)."""
    if target is None:
        try:
            target = Campaign.model_validate(bundle.read_json(run_id, layout.CAMPAIGN)).publish.target
        except ArtifactMissing:
            raise ConfigurationError(f"run {run_id} has no {layout.CAMPAIGN}: give a target") from None
    parse_target(target)  # a bad target fails before anything else
    return await publish_report(bundle, run_id, target, acknowledged_by=acknowledged_by,
                                draft_override=draft_override, settings=settings, dry_run=dry_run)
