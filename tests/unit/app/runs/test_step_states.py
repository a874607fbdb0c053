"""Step states of a run derived from its events (services.app.runs.progress)."""

from __future__ import annotations

from itertools import count
from typing import Any

import pytest

from contracts.events import STEPS
from services.app.runs.progress import one_line, run_status

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
    planned, started, completed = (
        ev("training.planned", at=10),
        ev("training.started", at=20),
        ev("training.completed", at=30),
    )
    assert states([completed, planned, started])["training"] == "done"
    assert states([planned, started])["training"] == "running"


def test_a_skipped_reason_makes_the_step_skipped_with_its_reason():
    result = run_status(RUN, [ev("corpus.completed", skipped_reason="shapes-only campaign")])
    corpus = next(s for s in result.steps if s.step == "corpus")
    assert corpus.state == "skipped"
    assert corpus.detail == "skipped: shapes-only campaign"
    assert corpus.last_event == "corpus.completed"


def test_a_failure_halts_the_run_and_carries_its_reason():
    events = [
        ev("campaign.submitted"),
        ev("profile.completed"),
        ev("corpus.failed", step="corpus", reason="no traffic"),
    ]
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
    events = [
        ev("profile.completed"),
        ev("corpus.failed", run_id="other-run-000", reason="x"),
        ev("gate.decided", run_id="x-y"),
    ]
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
        (
            ev("bench.trial.completed", cell_id="ngram-k3", trial=2, concurrency=4),
            "cell ngram-k3 trial 2 at concurrency 4",
        ),
    ],
)
def test_details_say_what_happened(event, detail):
    step = next(s for s in run_status(RUN, [event]).steps if s.last_event == event["schema"])
    assert step.detail == detail
    assert step.at == event["produced_at"]


def test_one_line_marks_each_step():
    events = [
        ev("profile.completed"),
        ev("corpus.completed", skipped_reason="shapes"),
        ev("capacity.unavailable", reasons=["x"]),
        ev("training.planned"),
        ev("bench.trial.completed"),
        ev("gate.failed", reason="r"),
        ev("report.requested"),
    ]
    assert one_line(run_status(RUN, events)) == "profile+ corpus- capacity! training? bench~ gatex report> publish."


# --- stalled runs (progress.find_stall) ------------------------------------------------

from datetime import UTC, datetime, timedelta  # noqa: E402 - grouped with the tests that use it

from services.app.runs.progress import STEP_EXPECTED_S, find_stall, plan_expected_s  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def stamped(schema: str, seconds: float, **fields: Any) -> dict[str, Any]:
    return {"schema": schema, "run_id": RUN, "event_id": f"s-{schema}-{seconds}",
            "produced_at": (T0 + timedelta(seconds=seconds)).isoformat(), **fields}


DONE_EVENTS = ("profile.completed", "corpus.completed", "capacity.selected", "training.completed", "bench.completed",
               "gate.decided", "report.rendered", "report.published")


def done_before(step: str, at: float = 0) -> list[dict[str, Any]]:
    """The completion events of every step before `step`."""
    return [stamped(schema, at) for schema in DONE_EVENTS[:STEPS.index(step)]]


def stall_after(events: list[dict[str, Any]], seconds: float, **kwargs: Any):
    return find_stall(run_status(RUN, events), events, now=T0 + timedelta(seconds=seconds), **kwargs)


def test_a_run_past_its_next_steps_expected_time_is_named_with_how_to_resume():
    events = [stamped("campaign.submitted", 0), stamped("profile.completed", 30)]
    quiet = STEP_EXPECTED_S["corpus"]
    assert stall_after(events, 30 + quiet - 1).stalled is None
    result = stall_after(events, 30 + quiet + 60)
    assert result.stalled is not None
    assert (result.stalled.step, result.stalled.state, result.stalled.last_event) == (
        "corpus",
        "pending",
        "profile.completed",
    )
    assert result.stalled.expected_from == "default" and result.stalled.resume == f"specdec resume {RUN}"
    corpus = next(s for s in result.steps if s.step == "corpus")
    assert corpus.detail.startswith("STALLED: no event for 16 min 00 s (expected within 15 min 00 s")
    assert f"specdec resume {RUN}" in corpus.detail


def test_a_running_steps_own_progress_restarts_the_clock():
    events = [*done_before("bench"), stamped("bench.trial.completed", 1000, cell_id="c", trial=0)]
    assert stall_after(events, 1000 + STEP_EXPECTED_S["bench"] - 1).stalled is None
    assert stall_after(events, 1000 + STEP_EXPECTED_S["bench"] + 1).stalled.step == "bench"


def test_the_plan_sets_the_expected_time_where_there_is_one():
    assert plan_expected_s("training", {"timeout_s": 3600, "kill_grace_s": 10}) == 3600 + 10 + 600
    assert plan_expected_s("bench", {"readiness_timeout_s": 300}) == 300 + 900
    assert plan_expected_s("gate", {"timeout_s": 1}) is None
    events = [*done_before("training"), stamped("training.started", 0)]
    assert stall_after(events, 5000, expected=lambda step: (4210.0, "plan")).stalled.expected_from == "plan"
    assert stall_after(events, 4000, expected=lambda step: (4210.0, "plan")).stalled is None


@pytest.mark.parametrize("last", ["training.planned", "capacity.unavailable", "profile.failed", "report.published"])
def test_a_run_waiting_on_an_operator_halted_or_finished_is_never_stalled(last):
    step = {"training.planned": "training", "capacity.unavailable": "capacity", "profile.failed": "profile"}.get(last)
    events = [*done_before(step), stamped(last, 1)] if step else done_before("publish") + [stamped(last, 1)]
    assert stall_after(events, 10**6).stalled is None
