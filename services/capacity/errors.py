"""Errors of the capacity step. Every message says what the operator should do.

A busy node, a failing idle check, or no node at all is *not* an error: it is
the verdict (`capacity.unavailable` with reasons). Only what stops the step
from seeing the scheduler at all raises, and the service turns it into
`capacity.failed`.
"""

from __future__ import annotations

from services.runtime.errors import SpecdecError


class CapacityError(SpecdecError):
    """Root of every capacity-step error."""


class CommandMissing(CapacityError):
    """A scheduler command or the idle-check program is not installed or not executable."""


class SchedulerFailed(CapacityError):
    """A scheduler command exited non-zero or ran past its timeout."""


class SchedulerOutputInvalid(CapacityError):
    """A scheduler command answered with output the adapter cannot read."""


class CapacityConfigError(CapacityError):
    """The campaign's capacity section cannot be used as written (selector, idle check)."""
