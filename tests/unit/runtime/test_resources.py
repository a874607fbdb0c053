"""A service's resources (services/runtime/resources.py): built by resources_for from its dependencies,
frozen, and what every service builds its routes from."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from services.runtime import apps
from services.runtime.bundle.bundle import BundleStore
from services.runtime.main import resources_for
from services.runtime.settings import RuntimeSettings


async def _idle(node: str) -> str | None:
    return None


def test_the_bundle_store_is_the_settings_root_unless_given_and_the_checks_the_steps_own(tmp_path: Path) -> None:
    settings = RuntimeSettings(bundle_root=tmp_path / "bundles")
    built = resources_for(settings)
    assert built.bundle.root == tmp_path / "bundles"
    assert (built.bench_recheck, built.training_recheck, built.capacity_runner) == (None, None, None)
    bundle = BundleStore(tmp_path / "elsewhere")
    given = resources_for(settings, bundle=bundle, bench_recheck=_idle)
    assert given.bundle is bundle and given.bench_recheck is _idle


def test_resources_cannot_be_swapped_once_built(tmp_path: Path) -> None:
    resources = resources_for(RuntimeSettings(bundle_root=tmp_path))
    with pytest.raises(FrozenInstanceError):
        resources.bundle = BundleStore(tmp_path / "other")  # type: ignore[misc]  # frozen: the refusal is the test


def test_every_service_builds_its_routes_from_one_resources_and_the_journal_keeps_one_trimmer(tmp_path: Path) -> None:
    resources = resources_for(RuntimeSettings(bundle_root=tmp_path))
    for name in apps.available():
        assert apps.load(name).routes(resources), name
    trimmer = resources.state["trimmer"]
    apps.load("journal").routes(resources)
    assert resources.state["trimmer"] is trimmer, "the journal's routes and its after_reconcile share one trimmer"
