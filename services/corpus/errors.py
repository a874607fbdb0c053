"""Errors of the corpus step. Every message says what to do next.

Per-record problems are *not* errors: a bad traffic line, a record without
text or without an output count, a duplicate, a record longer than the model
takes -- each is counted (and the first bad lines listed, redacted) in the
manifest. Only the whole-step outcomes below raise: permanent failures
(`StepFailed`), emitted as `corpus.failed` with the class name as
`error_type`. Messages name files, counts and record ids, not record content,
and every message is redacted when the error is built, so whatever prints,
logs or emits it is safe. A tokenizer folder or chat template that cannot be
used raises the shared `TokenizerUnusable` / `RenderCheckFailed`
(services.shared.text.errors), redacted the same way.
"""

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
