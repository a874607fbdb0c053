"""The report's last section, a k per concurrency (schedule_plan.py, schedule_section.py), on synthetic
bundles: the schedule from the measured counters and TPOTs, the predicted TPOT per level against the best
fixed k, and the candidate cells that prove it, valid campaign cells."""

from __future__ import annotations

import pytest
import yaml

from contracts.campaign import Cell
from services.publisher.pipeline import render_run
from services.publisher.prediction.schedule_plan import candidate_plans, proposed_cells
from services.publisher.prediction.schedule_section import schedule_blocks
from services.publisher.report.aggregate import read_campaign
from tests.unit.publisher.synthetic import CANDIDATE, RUN, Spec, build


def test_the_schedule_shortens_k_where_speculation_costs_more(store):
    # Faster than the standing cell at concurrency 1, slower at 4: the measured cost per drafted token rises.
    build(store, Spec(factors={1: 0.6, 4: 1.2}))
    data = read_campaign(store, RUN)
    [found] = candidate_plans(data)
    assert found.cell_id == CANDIDATE and [lv.concurrency for lv in found.plan.levels] == [1, 4]
    low, high = found.plan.levels
    assert high.cost > low.cost
    # At the measured k the model gives back the measured TPOT (the cost is read from it).
    for lv, own in zip(found.plan.levels, found.measured_tpot_ms, strict=True):
        assert lv.tpot_ms(3) == pytest.approx(own)
    assert found.plan.chosen[0] > found.plan.chosen[1]
    assert found.plan.schedule[0][:2] == (1, 1) and found.plan.schedule[-1][1] == 4
    for lv, k in zip(found.plan.levels, found.plan.chosen, strict=True):
        assert lv.tpot_ms(k) <= lv.tpot_ms(found.plan.fixed_k) + 1e-9

    cells = proposed_cells(data, found)
    sched = Cell.model_validate(cells["scheduled"]).serving.speculative
    assert sched.num_speculative_tokens_per_batch_size == [tuple(r) for r in found.plan.schedule]
    assert sched.num_speculative_tokens == max(found.plan.chosen)
    assert Cell.model_validate(cells["fixed"]).serving.speculative.num_speculative_tokens == found.plan.fixed_k
    assert cells["fixed"]["concurrency"] == cells["scheduled"]["concurrency"] == [1, 4]


def test_the_report_ends_with_the_schedule_and_the_cells_that_prove_it(store):
    build(store, Spec(factors={1: 0.6, 4: 1.2}))
    out = render_run(store, RUN)
    md = out.report.markdown.decode()
    last = md.rindex("\n## ")
    assert md[last:md.index("\n", last + 1)].endswith("Next measured lever")
    section = md[md.index("A k per concurrency: the schedule, predicted", last):]
    assert section.index("The schedule: ") > 0
    assert "predicted TPOT at best k" in section and "predicted TPOT at best fixed k" in section
    snippet = section[section.index("```\ncells:") + 4:]
    cells = yaml.safe_load(snippet[:snippet.index("```")])["cells"]
    assert [Cell.model_validate(c).cell_id for c in cells] == ["ngram-k1", "ngram-sched"]
    assert "specdec next " + RUN in section and "specdec gate --baseline" in section
    # report.json carries every schedule, the proposed one marked.
    [figure] = out.summary.schedules
    [found] = candidate_plans(read_campaign(store, RUN))
    assert figure.chosen and figure.cell_id == CANDIDATE and figure.measured_k == 3
    assert figure.schedule == list(found.plan.schedule) and figure.fixed_k == found.plan.fixed_k
    assert [lv.best_k for lv in figure.levels] == list(found.plan.chosen)
    assert all(lv.predicted_tpot_ms <= lv.predicted_fixed_tpot_ms + 1e-9 for lv in figure.levels)


def test_without_counters_there_is_no_schedule(store):
    build(store, Spec(bare_candidate=True, gate=False))
    blocks = schedule_blocks(read_campaign(store, RUN))
    assert "there is no schedule to predict" in blocks[-1].text[0]


def test_one_k_everywhere_is_a_fixed_k_proven_alone(store):
    build(store, Spec(factors={1: 0.6, 4: 0.6}))
    data = read_campaign(store, RUN)
    [found] = candidate_plans(data)
    assert not found.plan.varies and set(found.plan.chosen) == {found.plan.fixed_k}
    text = "\n".join(line for b in schedule_blocks(data) for line in getattr(b, "lines", ()))
    cells = yaml.safe_load(text[text.index("cells:"):])["cells"]
    assert [c["cell_id"] for c in cells] == [f"ngram-k{found.plan.fixed_k}"]

