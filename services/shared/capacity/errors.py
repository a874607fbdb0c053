"""Errors of the idle-node check. Every message says what the operator should do.

A busy node, a failing idle check or no node at all is a verdict, not an error: only what stops the
check from reading the scheduler raises, as a `StepFailed` (docs/capacity.md#outcomes).
"""

from __future__ import annotations

from services.runtime.errors import StepFailed


class CapacityError(StepFailed):
    """Root of the idle-node check's own errors."""


class SchedulerFailed(CapacityError):
    """A scheduler command exited non-zero or ran past its timeout."""


class SchedulerOutputInvalid(CapacityError):
    """A scheduler command answered with output the adapter cannot read."""


class CapacityConfigError(CapacityError):
    """The campaign's capacity section cannot be used as written (selector, idle check)."""
