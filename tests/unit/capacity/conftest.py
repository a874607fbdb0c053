"""The capacity step's tests answer the scheduler from the same recorded outputs as
the idle-node check's own tests (tests/unit/shared/capacity)."""

from __future__ import annotations

from tests.unit.shared.capacity.conftest import fixture_text, recorded  # noqa: F401 - fixtures
