"""Errors of the publisher. A weak or incomplete campaign is never an error: it is
a report marked DRAFT with its reasons. Errors are what stops a report or a
publish outright, with a message that says what to do."""

from __future__ import annotations

from services.runtime.errors import StepFailed


class PublisherError(StepFailed):
    """Root of every publisher error: a permanent failure, `report.failed` / `publish.failed` with the
    class name as error_type."""


class ReportInputError(PublisherError):
    """The run's bundle holds nothing a report can be rendered from (no run, no trial result)."""


class ReportConflict(PublisherError):
    """The bundle already holds a different report: reports are write-once."""


class PublishTargetError(PublisherError):
    """The publish target is not one the publisher can send to (scheme, path)."""


class PublishConflict(PublisherError):
    """A file target already holds a different file under a name this publish writes."""


class PublishFailed(PublisherError):
    """The target refused the report or never answered, after every retry; the attempts are recorded."""

    def __init__(self, reason: str, *, recorded: object | None = None) -> None:
        super().__init__(reason)
        # ArtifactRef of the recorded attempts (response.json), when written.
        self.recorded = recorded
