"""The guard's shared inputs, built once per session (see context.py)."""

from __future__ import annotations

import pytest

from tests.unit.guard.context import Ctx, build_context

# Variables the env checks declare (campaign_checks.py): set for every guard test, so that a declared
# name is found at launch and the workload's environment shows it.
DECLARED_ENV = ("GUARD_ENV_A", "GUARD_ENV_B", "GUARD_ENV_C")


@pytest.fixture(autouse=True, scope="session")
def _declared_env() -> object:
    mp = pytest.MonkeyPatch()
    for name in DECLARED_ENV:
        mp.setenv(name, f"{name.lower()}-value")
    yield
    mp.undo()


@pytest.fixture(scope="session")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> Ctx:
    return build_context(tmp_path_factory.mktemp("guard"))
