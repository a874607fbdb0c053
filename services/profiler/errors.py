"""Errors of the profiler. Every message says what to do next.

Per-line problems are *not* errors: a bad traffic line is counted and listed in
the profile (see `forms.LineError`); only the whole-run outcomes below raise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from services.runtime.errors import SpecdecError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from services.profiler.model import Profile


class ProfilerError(SpecdecError):
    """Root of every profiler error (a `SpecdecError`: the CLI exits 2 with its message)."""


class TrafficNotFound(ProfilerError):
    """The traffic file does not exist or cannot be read."""


class EmptyTraffic(ProfilerError):
    """The traffic file holds no accepted record (empty, blank or all rejected)."""


class TooManyRejected(ProfilerError):
    """The share of rejected lines passed the threshold.

    `profile` is the profile computed anyway (its rejected examples are
    redacted), so a caller can show the diagnosis; it must not be used as the
    run's profile.
    """

    def __init__(self, message: str, profile: Profile) -> None:
        super().__init__(message)
        self.profile = profile


class TokenizerError(ProfilerError):
    """The tokenizer folder is missing or holds no loadable tokenizer.json."""


class UnknownShape(ProfilerError):
    """A workload shape name is not one of the bundled shapes."""
