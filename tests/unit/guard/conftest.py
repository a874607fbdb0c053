"""The guard's shared inputs, built once per session (see context.py)."""

from __future__ import annotations

import pytest

from tests.unit.guard.context import Ctx, build_context


@pytest.fixture(scope="session")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> Ctx:
    return build_context(tmp_path_factory.mktemp("guard"))
