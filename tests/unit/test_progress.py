"""Step states of a run derived from its events (services.app.progress)."""

from __future__ import annotations

from itertools import count
from typing import Any

import pytest

from contracts.events import STEPS
from services.app.progress import one_line, run_status

RUN = "toy-20260101-000000-abcdef"
_clock = count()


def ev(schema: str, run_id: str = RUN, at: int | None = None, **fields: Any) -> dict[str, Any]:
    second = next(_clock) if at is None else at
    return {"schema": schema, "run_id": run_id, "event_id": f"e{second:06d}",
            "produced_at": f"2026-01-01T00:{second // 60:02d}:{second % 60:02d}+00:00", **fields}


def states(events: list[dict[str, Any]]) -> dict[str, str]:
    return {s.step: s.state for s in run_status(RUN, events).steps}


def test_no_events_leaves_every_step_pending():
    result = run_status(RUN, [])
    assert [s.step for s in result.steps] == list(STEPS)
    assert {s.state for s in result.steps} == {"pending"}
    assert (result.events, result.halted) == (0, False)


def test_a_submitted_campaign_requests_the_profile_step():
    assert states([ev("campaign.submitted")])["profile"] == "requested"


@pytest.mark.parametrize(
    ("schema", "step", "state"),
    [
        ("profile.completed", "profile", "done"),
        ("corpus.completed", "corpus", "done"),
        ("capacity.selected", "capacity", "done"),
        ("capacity.unavailable", "capacity", "unavailable"),
        ("training.planned", "training", "awaiting_approval"),
        ("training.started", "training", "running"),
        ("training.completed", "training", "done"),
        ("bench.planned", "bench", "awaiting_approval"),
        ("bench.trial.completed", "bench", "running"),
        ("bench.completed", "bench", "done"),
        ("gate.decided", "gate", "done"),
        ("report.rendered", "report", "done"),
        ("report.published", "publish", "done"),
        *((f"{step}.requested", step, "requested") for step in STEPS),
        *((f"{step}.failed", step, "failed") for step in STEPS),
    ],
)
def test_each_event_puts_its_step_in_its_state(schema, step, state):
    result = states([ev(schema)])
    assert result[step] == state
    assert [s for s, st in result.items() if st != "pending"] == [step]


def test_the_later_event_wins_whatever_the_input_order():
    planned, started, completed = ev("training.planned", at=10), ev("training.started", at=20), ev("training.completed", at=30)
    assert states([completed, planned, started])["training"] == "done"
    assert states([planned, started])["training"] == "running"


def test_a_skipped_reason_makes_the_step_skipped_with_its_reason():
    result = run_status(RUN, [ev("corpus.completed", skipped_reason="shapes-only campaign")])
    corpus = next(s for s in result.steps if s.step == "corpus")
    assert corpus.state == "skipped"
    assert corpus.detail == "skipped: shapes-only campaign"
    assert corpus.last_event == "corpus.completed"


def test_a_failure_halts_the_run_and_carries_its_reason():
    events = [ev("campaign.submitted"), ev("profile.completed"), ev("corpus.failed", step="corpus", reason="no traffic")]
    result = run_status(RUN, events)
    assert result.halted
    corpus = next(s for s in result.steps if s.step == "corpus")
    assert (corpus.state, corpus.detail) == ("failed", "no traffic")
    assert states(events)["profile"] == "done"


def test_a_retried_step_after_a_failure_is_no_longer_halted():
    events = [ev("corpus.failed", reason="bad"), ev("corpus.requested"), ev("corpus.completed")]
    result = run_status(RUN, events)
    assert not result.halted
    assert states(events)["corpus"] == "done"


def test_only_the_runs_own_events_count():
    events = [ev("profile.completed"), ev("corpus.failed", run_id="other-run-000", reason="x"), ev("gate.decided", run_id="x-y")]
    result = run_status(RUN, events)
    assert result.events == 1
    assert not result.halted
    assert states(events)["corpus"] == "pending"


def test_unknown_schemas_change_no_step():
    result = run_status(RUN, [ev("something.else"), ev("run.approved")])
    assert {s.state for s in result.steps} == {"pending"}
    assert result.events == 2


@pytest.mark.parametrize(
    ("event", "detail"),
    [
        (ev("gate.decided", decision="reject"), "decision: reject"),
        (ev("capacity.selected", node="gpu-7"), "node gpu-7"),
        (ev("capacity.unavailable", reasons=["a busy", "b down"]), "a busy; b down"),
        (ev("bench.trial.completed", cell_id="ngram-k3", trial=2, concurrency=4), "cell ngram-k3 trial 2 at concurrency 4"),
    ],
)
def test_details_say_what_happened(event, detail):
    step = next(s for s in run_status(RUN, [event]).steps if s.last_event == event["schema"])
    assert step.detail == detail
    assert step.at == event["produced_at"]


def test_one_line_marks_each_step():
    events = [
        ev("profile.completed"), ev("corpus.completed", skipped_reason="shapes"), ev("capacity.unavailable", reasons=["x"]),
        ev("training.planned"), ev("bench.trial.completed"), ev("gate.failed", reason="r"), ev("report.requested"),
    ]
    assert one_line(run_status(RUN, events)) == "profile+ corpus- capacity! training? bench~ gatex report> publish."
