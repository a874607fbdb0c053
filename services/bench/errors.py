"""Errors of the bench-runner's serving: a server that cannot be started or used.

`ServingError` is a `StepFailed`. The bench run (services/bench/run.py)
catches it per cell (the cell fails with the reason; the other cells still
run) and, before the first launch, turns it into `ExecutorUnavailable`; one
raised while planning is `bench.failed` with its class name.
"""

from __future__ import annotations

from services.runtime.errors import StepFailed


class ServingError(StepFailed):
    """A server could not be started or did not become ready."""


class ServerDied(ServingError):
    """The server process exited before it was ready or during a measurement."""


class ServerNotReady(ServingError):
    """The server did not answer /health before its deadline."""
