"""Rejected trials are listed and in no figure; the engine's read-back stands beside the declared config."""

from __future__ import annotations

import re

from contracts import layout
from services.publisher.pipeline import RenderOutcome, render_run
from services.publisher.report.aggregate import read_campaign
from services.publisher.report.document import Table
from services.runtime.bundle.bundle import BundleStore
from tests.unit.publisher.synthetic import CANDIDATE, LEVELS, RUN, STANDING, Spec, build


def _markdown(store: BundleStore, spec: Spec) -> tuple[str, RenderOutcome]:
    build(store, spec)
    out = render_run(store, RUN)
    return store.read_bytes(RUN, layout.REPORT_MARKDOWN).decode(), out


def sections(markdown: str) -> dict[str, str]:
    """The report's sections by their anchor id."""
    parts = re.split(r'<a id="([a-z-]+)"></a>\n\n## ', markdown)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_a_rejected_trial_is_listed_with_its_reason_and_in_no_figure(store: BundleStore) -> None:
    markdown, out = _markdown(store, Spec(rejected_trial=1))
    rejected = layout.rejected_result(CANDIDATE, 1, LEVELS[-1])
    data = out.report.document
    section = next(s for s in data.sections if s.id == "rejected")
    table = section.blocks[1]
    assert isinstance(table, Table)
    assert table.rows == (
        (CANDIDATE, str(LEVELS[-1]), "1", "the bench", "no drafts during the measured window", rejected),)
    # Only its own section (and the DRAFT reasons) name it: no table of figures, no plot caption, no plot.
    assert {name for name, text in sections(markdown).items() if rejected in text} == {"draft", "rejected"}
    assert {"latency", "throughput", "acceptance", "speedup", "gate"} <= set(sections(markdown))
    for plot in out.report.plots:
        assert all(rejected not in key for key in plot.evidence)
    assert any("1 trial(s) rejected" in r and rejected in r for r in out.summary.draft_reasons)
    assert f"{CANDIDATE}@c{LEVELS[-1]}" in markdown and "2 of 3 declared trial(s) have results (1 rejected" in markdown


def test_a_result_whose_counters_break_the_rule_is_rejected_by_the_report(campaign_data) -> None:
    data = campaign_data(edited_trial=0)
    (row,) = data.rejected
    assert row.by == "report" and row.trial == 0 and row.concurrency == LEVELS[0]
    assert row.reasons == ["0 per-position series, expected num_speculative_tokens=3"]
    arm = data.arm(CANDIDATE, LEVELS[0])
    assert [t.trial for t in arm.trials] == [1, 2] and row.path not in {t.path for t in arm.trials}
    # The gate, reading the same file, did not count it either.
    level = next(lvl for c in data.decision.candidates for lvl in c.levels if lvl.concurrency == LEVELS[0])
    assert level.candidate.trials == 2


def test_the_engine_read_back_stands_beside_the_declared_config(store: BundleStore) -> None:
    markdown, out = _markdown(store, Spec())
    assert "| standing | 0 | max_num_seqs | 8 | 8 | ok |" in markdown
    assert f"| {CANDIDATE} | 1 | speculative_method | ngram | ngram | ok |" in markdown
    assert f"| {CANDIDATE} | 1 | dtype | auto | bfloat16 | ok |" in markdown
    assert not out.summary.draft


def test_a_mismatch_or_a_launch_not_read_back_is_shown_and_makes_a_draft(campaign_data, store: BundleStore) -> None:
    mismatch = campaign_data(engine="mismatch")
    cand = next(row for row in mismatch.engine if row.cell_id == CANDIDATE)
    assert [m.field for m in cand.check.mismatches] == ["max_num_seqs"]
    _, out = _markdown(BundleStore(store.root.parent / "other", fsync=False), Spec(engine="mismatch"))
    assert any("serves max_num_seqs=256, the cell declares 8" in r for r in out.summary.draft_reasons)
    missing_store = BundleStore(store.root.parent / "missing", fsync=False)
    markdown, out = _markdown(missing_store, Spec(engine="missing"))
    assert f"| {CANDIDATE} | - | - | - | not read back | - | - |" in markdown
    assert any(f"cell {CANDIDATE} was not read back" in r for r in out.summary.draft_reasons)
    assert f"| {STANDING} | 0 | max_num_seqs | 8 | 8 | ok |" in markdown


def test_engine_rows_follow_the_plan_launches_and_every_attempt(store: BundleStore) -> None:
    build(store, Spec())
    first = layout.engine_check(layout.launch_folder(CANDIDATE, 1))
    again = layout.engine_check(layout.attempt_folder(layout.launch_folder(CANDIDATE, 1), 2))
    store.write_bytes(RUN, again, store.read_bytes(RUN, first))
    launches = [{"cell_id": STANDING}, {"cell_id": CANDIDATE}, {"cell_id": CANDIDATE}]
    store.write_json(RUN, layout.BENCH_PLAN, {"launches": launches, "draft": False})
    data = read_campaign(store, RUN)
    rows = [(row.cell_id, row.launch, row.path) for row in data.engine]
    assert rows == [(STANDING, 0, layout.engine_check(layout.launch_folder(STANDING, 0))), (CANDIDATE, 1, first),
                    (CANDIDATE, 1, again), (CANDIDATE, 2, None)]
    assert data.engine[-1].check is None
