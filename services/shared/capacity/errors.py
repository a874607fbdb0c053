"""Errors of the idle-node check. Every message says what the operator should do.

A busy node, a failing idle check, or no node at all is *not* an error: it is
the verdict (`capacity.unavailable` with reasons). Only what stops the check
from seeing the scheduler at all raises: a `CapacityError` below, or the
runner's `services.shared.scheduler.errors.CommandMissing` when a scheduler
command or the idle-check program is not installed. Both are `StepFailed`, so
the capacity step fails with `capacity.failed` and the class name as its
`error_type`; the pre-launch re-check (`recheck`) decides for the steps that
repeat it.
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
