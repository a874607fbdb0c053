"""The publisher: a campaign's bundle made into a report a reviewer can trust, sent out only when explicitly told to.

Pipeline: `aggregate.read_campaign` (bundle -> CampaignData) -> `render.render_report` -> `pipeline.render_run`
(write-once into report/) -> `publish.publish_run` (the service) or `publish.publish_report` (a person or a
tool). The service (app.py), `specdec report` / `specdec publish` and the MCP tool share them (docs/publisher.md)."""

from services.publisher.errors import (
    PublishConflict,
    PublishCredentialsError,
    PublisherError,
    PublishError,
    PublishFailed,
    PublishRefused,
    PublishTargetError,
    ReportConflict,
    ReportInputError,
)
from services.publisher.pipeline import render_run
from services.publisher.publish.outbox import DraftOverride
from services.publisher.publish.publish import Publication, publish_report, publish_run
from services.publisher.report.aggregate import read_campaign
from services.publisher.report.render import render_report

__all__ = [
    "DraftOverride",
    "Publication",
    "PublishConflict",
    "PublishCredentialsError",
    "PublishError",
    "PublishFailed",
    "PublishRefused",
    "PublishTargetError",
    "PublisherError",
    "ReportConflict",
    "ReportInputError",
    "publish_report",
    "publish_run",
    "read_campaign",
    "render_report",
    "render_run",
]
