"""Errors of the corpus step: whole-step outcomes only, each message saying what to do next.

Per-record problems (a bad line, a duplicate, a record too long) are counted in the manifest, never raised.
Messages name files, counts and record ids, not record content, and are redacted when the error is built,
so whatever prints, logs or emits them is safe (docs/corpus.md#redaction)."""

from __future__ import annotations

from services.runtime.errors import StepFailed
from services.shared.text.redact import redact


class CorpusError(StepFailed):
    """Root of every corpus-step error; its message is redacted on construction."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message)[0])


class CorpusSkipped(CorpusError):
    """No corpus is built for this input, by design (a shapes-only profile).

    The service records the step as skipped with `reason`; it is not a failure.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = str(self)


class ProfileUnusable(CorpusError):
    """PROFILE.json is missing, unreadable or not a profile."""


class TrafficUnusable(CorpusError):
    """The traffic file is missing, unreadable, or holds no usable record."""


class InvalidCorpusOptions(CorpusError):
    """An option of the build (size, held-out share, max_model_len) is out of range."""
