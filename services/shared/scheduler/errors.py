"""Errors of the shared scheduler adapters. Every message says what to do next.

`SchedulerError` is a `StepFailed`: a step that lets one propagate fails with
`<step>.failed` and the class name as `error_type`. The executors that must
turn a scheduler failure into something else (a failed launch recorded in the
capture, a failed bench cell, a cleanup error kept in the bundle) catch it.
"""

from __future__ import annotations

from services.runtime.errors import StepFailed


class SchedulerError(StepFailed):
    """Root of the shared scheduler adapters' errors."""


class CommandMissing(SchedulerError):
    """A scheduler command or an operator's program is not installed or not executable."""


class CommandTimedOut(SchedulerError):
    """A short scheduler command did not answer within its timeout."""


class JobError(SchedulerError):
    """Slurm answered, but not as expected: no job ID, a job it forgot, a failing squeue."""
