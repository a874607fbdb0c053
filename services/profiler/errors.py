"""Errors of the profiler. Every message says what to do next.

Per-line problems are *not* errors: a bad traffic line is counted and listed in
the profile (see `services.shared.text.forms.LineError`); only the whole-run
outcomes below raise. They are permanent failures (`StepFailed`): the service
emits `profile.failed` with the class name as `error_type`, the CLI exits 2
with the message. A bad tokenizer folder or shape name raises the shared
`TokenizerError` / `UnknownShape` (services.shared.text.errors).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from services.runtime.errors import StepFailed

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contracts.artifacts.profile import Profile


class ProfilerError(StepFailed):
    """Root of the profiler's own errors."""


class TrafficNotFound(ProfilerError):
    """The traffic file does not exist or cannot be read."""


class EmptyTraffic(ProfilerError):
    """The traffic file holds no accepted record (empty, blank or all rejected)."""


class TooManyRejected(ProfilerError):
    """The share of rejected lines passed the threshold.

    `profile` is the profile computed anyway (its rejected examples are
    redacted), so a caller can show the diagnosis; it must not be used as the
    run's profile. The service stores it and lists it in `artifacts`.
    """

    def __init__(self, message: str, profile: Profile) -> None:
        super().__init__(message)
        self.profile = profile
