"""The bench-runner's errors: one family, `BenchError`, a `StepFailed`.

The bench run (services/bench/run.py) catches them per cell: a cell whose
server, window, counters, result or evaluation fails is recorded as failed
with the reason, and the other cells still run; the step fails only when the
standing cell does. One raised while planning is `bench.failed` with its class
name. Before the first launch, a `ServingError` becomes `ExecutorUnavailable`.
"""

from __future__ import annotations

from services.runtime.errors import StepFailed


class BenchError(StepFailed):
    """Root of the bench-runner's errors."""


class ServingError(BenchError):
    """A server could not be started or did not become ready."""


class ServerDied(ServingError):
    """The server process exited before it was ready or during a measurement."""


class ServerNotReady(ServingError):
    """The server did not answer /health before its deadline."""


class PromptError(BenchError):
    """The prompts of a window cannot be built; the message names the file or shape and what to do."""


class WindowProcessFailed(BenchError):
    """The window's process exited without a window record."""


class WindowStalled(BenchError):
    """Window after window, the client read the streamed chunks in bursts: the timing would be the client's."""


class MetricsError(BenchError):
    """A /metrics text cannot be read, or its counters make no sense over the window."""


class SpeculationNotActive(BenchError):
    """The engine's counters show the declared speculation did not run as declared."""


class ResultError(BenchError):
    """A trial result cannot be built from what was measured; the message says what disagrees."""


class EvalError(BenchError):
    """An evaluation cannot produce a figure; the message says why and what to do."""
