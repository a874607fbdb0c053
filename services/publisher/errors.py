"""Errors of the publisher: what stops a report or a publish outright, with a message that says what to do.

A weak or incomplete campaign is never an error: it is a report marked DRAFT with its reasons. A publish
error raised before anything was sent means nothing reached the target; `PublishFailed` is the one raised
once sending began (docs/lake.md#errors)."""

from __future__ import annotations

from services.runtime.errors import StepFailed


class PublisherError(StepFailed):
    """Root of every publisher error: a permanent failure, `report.failed` / `publish.failed` with the
    class name as error_type."""


class ReportInputError(PublisherError):
    """The run's bundle holds nothing a report can be rendered from (no run, no trial result)."""


class ReportConflict(PublisherError):
    """The bundle already holds a different report: reports are write-once."""


class PublishError(PublisherError):
    """Root of the publish errors: the report was not (or not wholly) published."""


class PublishTargetError(PublishError):
    """The publish target is not one the publisher can send to (scheme, path, bucket)."""


class PublishRefused(PublishError):
    """The review point refused a live external publish: no dry run of this exact report to this
    target, a DRAFT without the explicit override, an override on a final report, or a bearer
    token over plain http://. Nothing was sent."""


class PublishCredentialsError(PublishError):
    """The target's credentials are missing or unusable (no AWS credentials, access denied, an
    unreadable token file); found before any upload, so nothing was sent."""


class PublishConflict(PublishError):
    """A target already holds a different file under a name this publish writes; nothing was overwritten."""


class PublishFailed(PublishError):
    """The target refused the report or never answered, after every retry; the attempts are recorded."""

    def __init__(self, reason: str, *, recorded: object | None = None) -> None:
        super().__init__(reason)
        # ArtifactRef of the recorded attempts (response.json), when written.
        self.recorded = recorded
