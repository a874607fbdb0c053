"""The publisher: turns a campaign's bundle into a report a reviewer can trust, and sends it out
only when told to, explicitly.

Pipeline: `aggregate.read_campaign` (bundle -> CampaignData) -> `render.render_report`
(plots, DRAFT marking, levers, Markdown + one self-contained HTML) ->
`pipeline.render_run` (write-once into report/) -> `publish.publish_run`
(file:// or http(s)://, dry run unless acknowledged). The service (app.py) and
`specdec report` / `specdec publish` (services/cli/report_cmd.py) share them.
"""

from services.publisher.aggregate import read_campaign
from services.publisher.errors import (
    PublishConflict,
    PublisherError,
    PublishFailed,
    PublishTargetError,
    ReportConflict,
    ReportInputError,
)
from services.publisher.pipeline import render_run
from services.publisher.publish import publish_run
from services.publisher.render import render_report

__all__ = [
    "PublishConflict",
    "PublishFailed",
    "PublishTargetError",
    "PublisherError",
    "ReportConflict",
    "ReportInputError",
    "publish_run",
    "read_campaign",
    "render_report",
    "render_run",
]
