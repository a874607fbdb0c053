"""DRAFT marking: each reason on its own, and the marking on every section of both formats."""

from __future__ import annotations

import re

import orjson
import pytest

from contracts.campaign import SpeculativeConfig
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
        ({"odd_hardware": True},
         r"identity of ngram-k3@c1 is incomplete: identity differs between trials in: hardware"),
        ({"bare_candidate": True, "gate": False},
         r"ngram-k3@c1 is incomplete: 3 trial file\(s\) carry no identity block"),
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


@pytest.mark.parametrize(("cached", "expected"), [
    (None, "suffix_decoding_max_cached_requests: vLLM's default, 10,000 requests"),
    (500, "suffix_decoding_max_cached_requests: 500 requests"),
    (0, None),
])
def test_a_suffix_cell_caching_earlier_answers_to_replayed_prompts_is_a_draft(campaign_data, cached, expected):
    data = campaign_data()
    cells = data.campaign.matrix.cells
    suffix = {"method": "suffix", "num_speculative_tokens": 3}
    if cached is not None:
        suffix["suffix_decoding_max_cached_requests"] = cached
    candidate = cells[1].model_copy(update={"serving": cells[1].serving.model_copy(
        update={"speculative": SpeculativeConfig(**suffix)})})
    matrix = data.campaign.matrix.model_copy(update={"cells": [cells[0], candidate]})
    data = data.model_copy(update={"campaign": data.campaign.model_copy(update={"matrix": matrix})})
    found = [r for r in draft_reasons(data) if r.startswith("suffix cell")]
    if expected is None:
        assert found == []
    else:
        [reason] = found
        assert f"suffix cell {candidate.cell_id} caches earlier requests' outputs ({expected})" in reason
        assert "declare suffix_decoding_max_cached_requests: 0" in reason


def test_sequential_rounds_growing_trial_count_is_not_an_identity_difference(store):
    # Rounds write trial_count 3, 3, 3 and then 4 for the trial the extra round added (services/bench/trial.py):
    # it names the trial within its arm, it does not describe the measurement.
    build(store, Spec())
    raw = orjson.loads(store.read_bytes(RUN, "bench/ngram-k3/trial-2/result-c1.json"))
    raw["identity"].update(trial=3, trial_count=4)
    store.write_bytes(RUN, "bench/ngram-k3/trial-3/result-c1.json", orjson.dumps(raw))
    data = read_campaign(store, RUN)
    assert len(data.arm("ngram-k3", 1).trials) == 4
    reasons = draft_reasons(data)
    assert not any("identity differs between trials" in r for r in reasons), reasons
    assert not any("ngram-k3@c1 is incomplete" in r for r in reasons), reasons
    # The largest trial_count is what the arm declares: with the fourth result missing it is short, and said so.
    store.write_bytes(RUN, "bench/ngram-k3/trial-3/result-c4.json", orjson.dumps(
        {**orjson.loads(store.read_bytes(RUN, "bench/ngram-k3/trial-2/result-c4.json"))} | {"identity": {
            **orjson.loads(store.read_bytes(RUN, "bench/ngram-k3/trial-2/result-c4.json"))["identity"],
            "trial": 3, "trial_count": 5}}))
    reasons = draft_reasons(read_campaign(store, RUN))
    assert any("ngram-k3@c4 is incomplete: 4 of 5 declared trial(s) have results" in r for r in reasons), reasons
