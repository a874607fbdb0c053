"""DRAFT marking: each reason on its own, and the marking on every section of both formats."""

from __future__ import annotations

import re

import pytest

from services.publisher.report.aggregate import read_campaign
from services.publisher.report.draft import draft_reasons
from tests.unit.publisher.synthetic import RUN, Spec, build


def test_a_clean_campaign_has_no_draft_reason(campaign_data):
    assert draft_reasons(campaign_data()) == []


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"skip_events": ("profile.completed",)}, r"step profile is missing"),
        ({"skip_events": ("capacity.selected",)}, r"step capacity is missing"),
        ({"bench_failed": True}, r"step bench failed \(bench\.failed: vLLM did not start"),
        ({"factors": {1: 1.0, 4: 1.0}}, r"the gate is inconclusive"),
        ({"gate": False}, r"no valid gate decision"),
        ({"journal": False}, r"no events\.jsonl in the bundle"),
        ({"source_revision": None}, r"identity of ngram-k3@c1 is incomplete: source revision unknown"),
        ({"missing_trials": 1}, r"identity of ngram-k3@c4 is incomplete: 2 of 3 declared trial\(s\) have results"),
        ({"odd_hardware": True}, r"identity of ngram-k3@c1 is incomplete: identity differs between trials in: hardware"),
        ({"bare_candidate": True, "gate": False}, r"ngram-k3@c1 is incomplete: 3 trial file\(s\) carry no identity block"),
        ({"exploratory": True, "trials": 2}, r"the matrix is exploratory"),
    ],
)
def test_each_reason_marks_the_campaign_draft(campaign_data, fields, expected):
    reasons = draft_reasons(campaign_data(**fields))
    assert any(re.search(expected, r) for r in reasons), reasons


def test_an_unreadable_result_file_is_a_reason_not_a_crash(store):
    build(store, Spec())
    store.write_bytes(RUN, "bench/ngram-k3/trial-9/result-c1.json", b"{not json")
    data = read_campaign(store, RUN)
    assert any("unreadable input: bench/ngram-k3/trial-9/result-c1.json" in r for r in draft_reasons(data))
    assert len(data.arm("ngram-k3", 1).trials) == 3  # the readable ones still count


def test_a_later_success_supersedes_an_earlier_failure(store):
    from contracts.events import BenchCompleted, BenchFailed

    info = build(store, Spec(journal=True, skip_events=("bench.completed",)))
    failed = BenchFailed(run_id=RUN, producer="t", step="bench", reason="node lost", error_type="NodeLost")
    store.append_event(RUN, failed.event_id, failed.to_json())
    done = BenchCompleted(run_id=RUN, producer="t", results=info["results"], draft=False)
    store.append_event(RUN, done.event_id, done.to_json())
    assert not any("bench" in r for r in draft_reasons(read_campaign(store, RUN)))


def test_draft_stands_in_the_title_and_on_every_section(drafted):
    _, out = drafted
    md, html = out.report.markdown.decode(), out.report.html.decode()
    assert out.summary.draft and out.summary.draft_reasons
    assert md.splitlines()[0].startswith("# DRAFT - ")
    headings = re.findall(r"^## (.+)$", md, flags=re.M)
    assert len(headings) >= 9 and all(h.startswith("DRAFT - ") for h in headings)
    assert re.search(r"<title>DRAFT - ", html) and '<div class="draft-mark">DRAFT</div>' in html
    sections = re.findall(r"<section id=\"[^\"]+\">(.*?)</section>", html, flags=re.S)
    assert len(sections) == len(headings)
    for body in sections:
        assert body.lstrip().startswith('<h2><span class="draft">DRAFT</span>') and 'class="draft-banner"' in body
    why = md[md.index("Why this is a DRAFT"):md.index("## DRAFT - Summary")]
    for reason in out.summary.draft_reasons:
        assert f"- {reason}" in why
    assert any("step profile is missing" in r for r in out.summary.draft_reasons)
    assert any("inconclusive" in r for r in out.summary.draft_reasons)
