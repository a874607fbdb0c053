"""The report leads with the per-level answer: its chart is the page's first image, before the summary,
the steps, the review point and the identity table; per level, the interval after each look (recomputed
with the gate's rule, the last equal to the decision's own) and where the trials stopped."""

from __future__ import annotations

import re

import pytest

from contracts.campaign import GateSpec
from services.gate import decide
from services.gate.simulate import NoiseModel
from services.publisher.pipeline import render_run
from services.publisher.report import answer
from services.runtime.bundle.bundle import BundleStore
from tests.unit.gate.test_decide import arm
from tests.unit.publisher.synthetic import CANDIDATE, LEVELS, RUN, Spec, build

SPEC = GateSpec(objective="tpot", acceptance_floor=0.5)
NOISY = NoiseModel(trial_cv=0.06, request_cv=0.05)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    bundle = BundleStore(tmp_path_factory.mktemp("answer") / "bundles", fsync=False)
    build(bundle, Spec())
    return render_run(bundle, RUN)


def test_the_answer_chart_is_the_first_thing_on_the_page(rendered):
    html = rendered.report.html.decode()
    first_image = html.index("<img ")
    for later in ('id="summary"', 'id="steps"', 'id="identity"'):
        assert first_image < html.index(later), later
    assert rendered.report.document.sections[0].id == "answer"
    assert rendered.report.plots[0].name == answer.PLOT_NAME
    md = rendered.report.markdown.decode()
    assert md.index(f"plots/{answer.PLOT_NAME}") < md.index("Summary")


def test_every_candidate_level_has_its_answer_and_its_looks(rendered):
    md = rendered.report.markdown.decode()
    section = md[md.index("The answer per level"):md.index("Summary")]
    rows = [line for line in section.splitlines() if line.startswith("| [")]
    levels = {str(level) for level in LEVELS}
    answered = {cells[3] for line in rows if (cells := [c.strip() for c in line.split("|")])[2] == CANDIDATE}
    assert levels <= answered
    assert "minimum effect 1 %" in section
    assert section.count("stopped here (") == len(rows) // 2  # one look per level without a cap, each where it stopped


def sequential_decision():
    # Noisy: the first looks are open; the decision is taken on 8 trials with a cap of 10.
    return decide(arm(1, "standing", trials=8, noise=NOISY), {"ngram": arm(2, "ngram", factor=0.85, trials=8,
                                                                          noise=NOISY)}, SPEC, max_trials=10)


def test_the_last_look_is_the_decisions_own_interval() -> None:
    d = sequential_decision()
    level = d.candidates[0].levels[0]
    seen = answer.looks(d, level)
    assert [look.trials for look in seen] == list(range(3, 9))
    o = level.objective
    assert o is not None and o.interval is not None
    # tpot is lower-is-better: the gain is the change with its sign turned, the interval mirrored.
    assert seen[-1].low == pytest.approx(-o.interval.high_pct) and seen[-1].high == pytest.approx(-o.interval.low_pct)
    widths = [look.high - look.low for look in seen]
    assert widths[0] > widths[-1], "the interval shrinks as trials accumulate"
    assert seen[-1].verdict == {"win": "better", "reject": "worse"}.get(level.outcome, seen[-1].verdict)


def test_without_a_cap_there_is_one_look() -> None:
    d = decide(arm(1, "standing"), {"ngram": arm(2, "ngram", factor=0.8)}, SPEC)
    assert [look.trials for look in answer.looks(d, d.candidates[0].levels[0])] == [3]


def test_no_decision_no_chart(tmp_path) -> None:
    bundle = BundleStore(tmp_path / "bundles", fsync=False)
    build(bundle, Spec(gate=False))
    out = render_run(bundle, RUN)
    assert answer.PLOT_NAME not in {p.name for p in out.report.plots}
    assert not re.search(r'id="answer"', out.report.html.decode())
