"""The root of specdec's runtime errors, and the errors a step raises on purpose."""

from __future__ import annotations

from typing import Any


class SpecdecError(Exception):
    """Root of every error specdec raises on purpose."""


class StepFailed(SpecdecError):
    """A step failed for a reason the operator must act on; the run halts there.

    A handler raises it to emit `<step>.failed` with this reason instead of
    retrying: retrying cannot fix a bad input.
    """

    def __init__(self, reason: str, *, error_type: str | None = None, artifacts: list[Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error_type = error_type or type(self).__name__
        # ArtifactRefs of what the step produced before failing; the bundle keeps them.
        self.artifacts = list(artifacts or [])


class ConfigurationError(SpecdecError):
    """A setting or input is invalid; the message says which and what to do."""


class BrokerUnavailable(SpecdecError):
    """Redis did not answer; the message names the URL (without password) tried."""
