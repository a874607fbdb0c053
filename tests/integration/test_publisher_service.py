"""The publisher service through a real Redis: gate.decided -> report.rendered -> report.published."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from contracts.events import PublishRequested
from services.publisher import app
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.service import Service, bootstrap
from services.runtime.main import resources_for
from services.runtime.settings import RuntimeSettings
from tests.support.services import wait_events
from tests.unit.publisher.synthetic import RUN, Spec, build


@asynccontextmanager
async def publisher(settings: RuntimeSettings) -> AsyncIterator[Service]:
    """The publisher's own routes, started in this event loop (as `running` does for a registered service)."""
    resources = resources_for(settings)
    service = bootstrap(app.NAME, app.routes(resources), settings=settings, resources=resources)
    await service.start()
    try:
        yield service
    finally:
        await service.stop(grace_s=1.0)


async def test_gate_decided_renders_then_publishes_a_dry_run(settings):
    bundle = BundleStore(settings.bundle_root)
    decided = build(bundle, Spec(skip_events=("gate.decided",)))["decided"]
    async with publisher(settings) as service:
        await service.bus.publish(decided)
        events = await wait_events(settings, {"report.rendered", "report.published"}, run_id=RUN, timeout_s=60)
    rendered, published = events["report.rendered"], events["report.published"]
    assert rendered["causation_id"] == decided.event_id and rendered["draft"] is False
    assert rendered["html"]["sha256"] == bundle.ref(RUN, "report/report.html").sha256
    assert published["causation_id"] == rendered["event_id"]
    assert published["dry_run"] is True and published["target"] == "file://published"
    sent = {ref["uri"].split("/report/", 1)[1]: ref["sha256"] for ref in published["sent"]}
    assert sent["report.html"] == rendered["html"]["sha256"] and sent["report.md"] == rendered["markdown"]["sha256"]
    for name, sha in sent.items():
        assert hashlib.sha256((bundle.run_dir(RUN) / "report" / name).read_bytes()).hexdigest() == sha
    assert not (bundle.run_dir(RUN) / "published").exists()


async def test_publish_requested_for_an_unrendered_run_fails_with_what_to_do(settings):
    bundle = BundleStore(settings.bundle_root)
    build(bundle, Spec(acknowledged=True))
    async with publisher(settings) as service:
        await service.bus.publish(PublishRequested(run_id=RUN, producer="test", requested_by="test"))
        events = await wait_events(settings, {"report.published", "publish.failed"}, run_id=RUN)
    failed = events["publish.failed"]
    assert failed["step"] == "publish" and "specdec report" in failed["reason"]


async def test_a_rejected_trial_and_a_launch_not_read_back_are_in_the_rendered_report(settings):
    bundle = BundleStore(settings.bundle_root)
    decided = build(bundle, Spec(skip_events=("gate.decided",), rejected_trial=2, engine="missing"))["decided"]
    async with publisher(settings) as service:
        await service.bus.publish(decided)
        events = await wait_events(settings, {"report.rendered"}, run_id=RUN, timeout_s=60)
    assert events["report.rendered"]["draft"] is True
    summary = bundle.read_json(RUN, "report/report.json")
    assert any("1 trial(s) rejected" in r and "rejected-c4.json" in r for r in summary["draft_reasons"])
    assert any("cell ngram-k3 was not read back" in r for r in summary["draft_reasons"])
    markdown = bundle.read_bytes(RUN, "report/report.md").decode()
    assert ("| ngram-k3 | 4 | 2 | the bench | no drafts during the measured window"
            " | bench/ngram-k3/trial-2/rejected-c4.json |") in markdown
    assert "| ngram-k3 | - | - | - | not read back | - | - |" in markdown
