"""Fixtures of the publisher's unit tests: synthetic bundles (see synthetic.py) and rendered reports."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from services.publisher.pipeline import RenderOutcome, render_run
from services.publisher.report.aggregate import read_campaign
from services.publisher.report.model import CampaignData
from services.runtime.bundle.bundle import BundleStore
from tests.unit.publisher.synthetic import RUN, Spec, build


@pytest.fixture
def store(tmp_path: Path) -> BundleStore:
    return BundleStore(tmp_path / "bundles", fsync=False)


@pytest.fixture
def campaign_data(store: BundleStore) -> Callable[..., CampaignData]:
    """Build a synthetic bundle from Spec fields and read it back."""

    def make(**fields) -> CampaignData:
        build(store, Spec(**fields))
        return read_campaign(store, RUN)

    return make


@pytest.fixture(scope="session")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[BundleStore, RenderOutcome]:
    """A clean promotion (two cells x two levels x 3 trials), rendered once. Shared: tests may add
    publish records under keys of their own, never change what is there."""
    bundle = BundleStore(tmp_path_factory.mktemp("clean") / "bundles", fsync=False)
    build(bundle, Spec())
    return bundle, render_run(bundle, RUN)


@pytest.fixture(scope="session")
def drafted(tmp_path_factory: pytest.TempPathFactory) -> tuple[BundleStore, RenderOutcome]:
    """An inconclusive campaign (no real effect) with a missing step: a DRAFT, rendered once."""
    bundle = BundleStore(tmp_path_factory.mktemp("draft") / "bundles", fsync=False)
    build(bundle, Spec(factors={1: 1.0, 4: 1.0}, skip_events=("profile.completed",)))
    return bundle, render_run(bundle, RUN)
