"""Publishing reviewed (issue 29, not yet fixed): the gap, as a strict xfail.

The campaign-level `i_understand_this_publishes_externally` makes the publisher service go live to an
external target on its own after its own dry run, and nobody reviews it. A live external publish should
need a call carrying the acknowledgement after a dry run of the same report, or `publish` listed in
`review.pre_approve`; the campaign's acknowledgement alone then publishes nothing live, and stands in
contracts/inert.py's conditional table."""

from __future__ import annotations

import pytest

from contracts import inert
from services.publisher.publish_review import live_external


@pytest.mark.xfail(strict=True, reason="the campaign's acknowledgement alone sends live (issue 29)")
def test_the_campaign_acknowledgement_alone_publishes_nothing_live():
    live, why = live_external("some-run", "s3://bucket/prefix", acknowledged_by="campaign", draft=False,
                              override=None, reviewed="publish/dry-run/abc.json")
    assert not live, why
    assert "acknowledgements.i_understand_this_publishes_externally" in inert.INERT_WHERE
