"""No inert configuration (docs/design.md#principle-1-no-inert-configuration): the campaign fields the
publisher reads each change what it does."""

from __future__ import annotations

from contracts.events import ReportRendered
from services.publisher.app import publish_for
from tests.unit.publisher.synthetic import RUN, Spec, campaign


async def test_publish_target_and_acknowledgement_each_change_the_publish(clean, tmp_path):
    bundle, out = clean

    async def published(spec: Spec):
        # A fresh event per publish: each is its own step with its own records.
        event = ReportRendered(run_id=RUN, producer="t", markdown=out.markdown, html=out.html, draft=False)
        return await publish_for(bundle, event, campaign(spec), producer="publisher/t")

    base = Spec(publish_target=f"file://{tmp_path / 'a'}", acknowledged=True)
    first = await published(base)
    assert first.dry_run is False and (tmp_path / "a" / RUN / "report.html").is_file()
    other_target = await published(Spec(publish_target=f"file://{tmp_path / 'b'}", acknowledged=True))
    assert other_target.target != first.target and (tmp_path / "b" / RUN / "report.html").is_file()
    not_acknowledged = await published(Spec(publish_target=f"file://{tmp_path / 'c'}", acknowledged=False))
    assert not_acknowledged.dry_run is True and not (tmp_path / "c").exists()
