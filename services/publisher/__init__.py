"""The publisher: turns a campaign's bundle into a report a reviewer can trust, and sends it out
only when told to, explicitly.

Pipeline: `aggregate.read_campaign` (bundle -> CampaignData) -> `render.render_report`
(plots, DRAFT marking, levers, Markdown + one self-contained HTML) ->
`pipeline.render_run` (write-once into report/) -> `publish.publish_run` (the
service) / `publish.publish_report` (a person or a tool): file://, s3:// or
http(s)://, dry run unless acknowledged, and an external target only after a
recorded dry run of the same report (publish_review.py). The service (app.py),
`specdec report` / `specdec publish` (services/cli/report_cmd.py) and the MCP
tool share them.
"""

from services.publisher.report.aggregate import read_campaign
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
from services.publisher.publish.outbox import DraftOverride
from services.publisher.pipeline import render_run
from services.publisher.publish.publish import Publication, publish_report, publish_run
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
