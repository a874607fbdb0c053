"""The error boundary of a step (docs/design.md#the-error-boundary): permanent or transient.

Permanent (`StepFailed` and every non-transient `SpecdecError`) becomes `<step>.failed` and the run halts;
transient (marked `transient = True`, or any foreign error) is retried and dead-lettered on its last
delivery. `as_step_failure` is the one mapping: handlers let errors propagate, nothing re-wraps them.
"""

from __future__ import annotations

import re
from typing import Any

from contracts.errors import SpecdecError

__all__ = [
    "BrokerUnavailable",
    "CampaignUnusable",
    "ConfigurationError",
    "SpecdecError",
    "StepFailed",
    "as_step_failure",
]


class StepFailed(SpecdecError):
    """A step failed for a reason the operator must act on; the run halts there.

    A handler raises it (or a subclass) to emit `<step>.failed` with this reason
    instead of retrying: retrying cannot fix a bad input.
    """

    def __init__(self, reason: str, *, error_type: str | None = None, artifacts: list[Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error_type = error_type or type(self).__name__
        # ArtifactRefs of what the step produced before failing; the bundle keeps them.
        self.artifacts = list(artifacts or [])


class CampaignUnusable(StepFailed):
    """The run's stored campaign is missing (`CampaignMissing`) or invalid (`CampaignInvalid`)."""


def as_step_failure(exc: BaseException) -> StepFailed | None:
    """The permanent failure `exc` stands for, or None when retrying may help."""
    if isinstance(exc, StepFailed):
        return exc
    if isinstance(exc, SpecdecError) and not exc.transient:
        return StepFailed(str(exc), error_type=type(exc).__name__)
    return None


class ConfigurationError(SpecdecError):
    """A setting or input is invalid; the message says which and what to do."""


class BrokerUnavailable(SpecdecError):
    """Redis did not answer; the message names the URL (without password) tried."""

    transient = True


def invalid_input(exc: Any) -> str:
    """A pydantic ValidationError in one line, as every entry point words it: `invalid input: loc: msg; ...`."""
    problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())
    return f"invalid input: {problems}"


_QUOTED = re.compile(r"'([^'<][^']+)'")  # a quoted excerpt of the input: more than one character, not a `<token>`


def parse_error_at(path: Any, exc: BaseException) -> str:
    """Where a YAML or JSON file failed to parse, as `FILE:LINE:COLUMN: what went wrong` (1-based), never the
    file's text: PyYAML's own message quotes the offending line, and the file may hold a password. Quoted excerpts
    of the input in the description (an alias or tag name) are left out too."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:  # yaml.MarkedYAMLError
        line, column = mark.line + 1, mark.column + 1
        what = getattr(exc, "problem", None) or getattr(exc, "context", None) or "not valid YAML"
    elif hasattr(exc, "lineno") and hasattr(exc, "colno"):  # json.JSONDecodeError (orjson's too)
        line, column, what = exc.lineno, exc.colno, getattr(exc, "msg", "not valid JSON")
    else:
        return f"{path}: {type(exc).__name__} (no position given)"
    described = _QUOTED.sub("'...'", str(what))
    return f"{path}:{line}:{column}: {described}"
