"""Recorded scheduler outputs for the capacity adapters' unit tests.

`RecordedRunner` answers each argv from a table of recorded outputs (exactly
as a real CommandRunner would return them) and fails the test on any argv it was not
given: an adapter that runs an unexpected command is caught, not silently fed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from services.shared.scheduler.runner import RunResult

FIXTURES = Path(__file__).parent / "fixtures"


class RecordedRunner:
    def __init__(
        self, outputs: dict[tuple[str, ...], RunResult | str], idle_check: Callable[[list[str]], int] | None = None
    ):
        self.outputs = outputs
        # Decides the exit status of any argv not in `outputs` (the operator's idle check).
        self.idle_check = idle_check
        self.calls: list[list[str]] = []
        self.envs: list[Mapping[str, str] | None] = []  # the environment each call was given (None: the service's)

    def __call__(self, argv: Sequence[str], *, timeout_s: float, env: Mapping[str, str] | None = None) -> RunResult:
        argv = [str(a) for a in argv]
        self.calls.append(argv)
        self.envs.append(env)
        recorded = self.outputs.get(tuple(argv))
        if recorded is None:
            if self.idle_check is None:
                raise AssertionError(f"unexpected command {argv}; recorded: {list(self.outputs)}")
            return RunResult(argv=tuple(argv), exit_code=self.idle_check(argv), stdout="", stderr="", duration_s=0.01)
        if isinstance(recorded, str):
            return RunResult(argv=tuple(argv), exit_code=0, stdout=recorded, stderr="", duration_s=0.01)
        return recorded


@pytest.fixture
def fixture_text() -> Callable[[str], str]:
    """Reads a recorded output from fixtures/."""
    return lambda name: (FIXTURES / name).read_text()


@pytest.fixture
def recorded() -> type[RecordedRunner]:
    return RecordedRunner
