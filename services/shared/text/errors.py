"""Errors of the shared text utilities: permanent failures (`StepFailed`) of whichever step hit them.

The same bad input fails the same way, with the same event, in every step. `TokenizerUnusable` and
`RenderCheckFailed` may quote a record: their message is redacted when it is built.
"""

from __future__ import annotations

from services.runtime.errors import StepFailed
from services.shared.text.redact import redact


class TextError(StepFailed):
    """Root of the shared text utilities' errors."""


class TokenizerError(TextError):
    """The tokenizer folder is missing or holds no loadable tokenizer.json (token counting)."""


class UnknownShape(TextError):
    """A workload shape name is not one of the bundled shapes."""


class RedactedTextError(TextError):
    """A text error whose message is redacted on construction."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message)[0])


class TokenizerUnusable(RedactedTextError):
    """The tokenizer folder is missing or its files cannot be loaded (chat template, counts)."""


class RenderCheckFailed(RedactedTextError):
    """The chat template does not compile, raised, dropped content, or a record is too long."""


class TrafficLineTooLong(TextError):
    """A traffic line is longer than the most a line may hold (services/shared/text/lines.py)."""
