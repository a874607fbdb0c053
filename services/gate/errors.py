"""Errors of the gate. Bad input stops the gate with a message that says what to fix;
a weak or incomplete measurement is never an error: it is an `inconclusive` decision."""

from __future__ import annotations

from services.runtime.errors import StepFailed


class GateError(StepFailed):
    """Root of every gate error: a permanent failure, `gate.failed` with the class name as error_type."""


class GateSpecError(GateError):
    """The gate spec cannot be evaluated (e.g. no objective)."""


class ResultFileError(GateError):
    """One or more trial result files cannot be read; the message names each file and why."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(
            f"{len(problems)} trial result file(s) unreadable:\n  "
            + "\n  ".join(problems)
            + "\nEach file must be one JSON object as `vllm bench serve --save-result` writes it."
        )


class GateInputError(GateError):
    """The arms given to the gate are unusable as a comparison (no files, bad candidate names)."""
