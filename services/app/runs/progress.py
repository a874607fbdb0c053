"""Step states of a run, derived from its events (pure: no I/O)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from contracts.envelope import Strict
from contracts.steps import STEPS
from services.app.runs.rounds_status import RoundsCost

# schema -> (step, state it puts the step in)
_TRANSITIONS: dict[str, tuple[str, str]] = {
    "campaign.submitted": ("profile", "requested"),
    "profile.completed": ("profile", "done"),
    "corpus.completed": ("corpus", "done"),
    "capacity.selected": ("capacity", "done"),
    "capacity.unavailable": ("capacity", "unavailable"),
    "training.planned": ("training", "awaiting_approval"),
    "training.started": ("training", "running"),
    "training.completed": ("training", "done"),
    "bench.planned": ("bench", "awaiting_approval"),
    "bench.trial.completed": ("bench", "running"),
    "bench.completed": ("bench", "done"),
    "gate.decided": ("gate", "done"),
    "report.rendered": ("report", "done"),
    "report.published": ("publish", "done"),
}
for _step in STEPS:
    _TRANSITIONS[f"{_step}.requested"] = (_step, "requested")
    _TRANSITIONS[f"{_step}.failed"] = (_step, "failed")


class StepState(Strict):
    """Where one step of a run stands."""

    step: str = Field(description="Step name.")
    state: str = Field(
        description="pending, requested, awaiting_approval, queued (bench: waiting for another run's bench on its "
        "node), running, done, skipped, unavailable or failed."
    )
    detail: str | None = Field(default=None, description="Reason, decision or counts, in words.")
    last_event: str | None = Field(default=None, description="Schema of the last event about this step.")
    at: str | None = Field(default=None, description="When that event was produced (UTC, ISO 8601).")


# How long each step may go without an event of its run before `specdec status` calls the
# run stalled, where the step's plan says nothing (docs/delivery.md, "Stalled runs"). Generous:
# a stall is a step nobody works on, not a slow one. Training and bench are read from their
# plans when there is one (`plan_expected_s`).
STEP_EXPECTED_S: dict[str, float] = {
    "profile": 600.0,  # reads and redacts the traffic file
    "corpus": 900.0,  # tokenizes and splits it
    "capacity": 300.0,  # one scheduler query
    "training": 7200.0,  # without a plan: the campaign's default commands.train.timeout_s is 3600 s, twice that
    "bench": 1800.0,  # without a plan: one trial (a server start and a measured window) between events
    "gate": 300.0,  # statistics over the trial results
    "report": 600.0,  # renders the report (charts, a headless browser for the PDF)
    "publish": 600.0,  # uploads the bundle
}
# What a plan's own limit leaves out: after the trainer's timeout, its probes and the capture
# of its outputs; before a bench trial's window, the server's start is bounded by the plan's
# readiness timeout, and the window itself takes this long at most.
TRAINING_AFTER_TIMEOUT_S = 600.0
BENCH_WINDOW_S = 900.0
# States in which a run waits on someone, not on a service: never stalled.
NOT_STALLED = frozenset({"awaiting_approval", "queued", "failed", "unavailable"})


class Stall(Strict):
    """A run whose next step has had no event for longer than that step's expected time."""

    step: str = Field(description="The step the run waits on (the first not done nor skipped).")
    state: str = Field(description="That step's state (pending, requested or running).")
    since: str = Field(description="When the run's last event was produced (UTC, ISO 8601).")
    last_event: str = Field(description="Schema of the run's last event.")
    waiting_s: float = Field(description="Seconds since that event, when status was read.")
    expected_s: float = Field(description="Seconds the step may go without an event.")
    expected_from: Literal["plan", "default"] = Field(
        description="plan: from the step's stored plan; default: progress.STEP_EXPECTED_S.")
    resume: str = Field(description="The command that starts the step again.")
    hint: str = Field(description="What to check and do, in words.")


class RunStatus(Strict):
    """Every step of a run, in flow order."""

    run_id: str = Field(description="The run.")
    events: int = Field(description="Events seen for the run.")
    halted: bool = Field(description="True when a step failed: the run stops there.")
    steps: list[StepState] = Field(description="Every step in flow order.")
    stalled: Stall | None = Field(
        default=None, description="Set when the run's next step has had no event for longer than expected "
        "(only `status` computes it; watch and the demo leave it null).")
    rounds: RoundsCost | None = Field(
        default=None, description="Sequential rounds (gate.max_trials): the expected trials per arm for the "
        "minimum effect, from round 1 (the pilot) or earlier runs of the same target and hardware, and where the "
        "rounds stand (only `status` computes it; null without rounds).")


def event_detail(event: dict[str, Any]) -> str | None:
    """What a status line says of the event beyond its schema (the reason of a failure, ...)."""
    schema = event.get("schema", "")
    if schema.endswith(".failed"):
        return event.get("reason")
    if event.get("skipped_reason"):
        return f"skipped: {event['skipped_reason']}"
    if schema == "gate.decided":
        return f"decision: {event.get('decision')}" + (f" ({event['winner']})" if event.get("winner") else "")
    if schema == "bench.trial.completed":
        return f"cell {event.get('cell_id')} trial {event.get('trial')} at concurrency {event.get('concurrency')}"
    if schema == "capacity.unavailable":
        return "; ".join(event.get("reasons") or [])
    if schema == "capacity.selected":
        return f"node {event.get('node')}"
    return None


def run_status(run_id: str, events: Iterable[dict[str, Any]]) -> RunStatus:
    states = {step: StepState(step=step, state="pending") for step in STEPS}
    ordered = sorted((e for e in events if e.get("run_id") == run_id), key=lambda e: str(e.get("produced_at", "")))
    for event in ordered:
        transition = _TRANSITIONS.get(event.get("schema", ""))
        if transition is None:
            continue
        step, state = transition
        if state == "done" and event.get("skipped_reason"):
            state = "skipped"
        states[step] = StepState(
            step=step,
            state=state,
            detail=event_detail(event),
            last_event=event["schema"],
            at=str(event.get("produced_at")),
        )
    halted = any(s.state == "failed" for s in states.values())
    return RunStatus(run_id=run_id, events=len(ordered), halted=halted, steps=list(states.values()))


def one_line(status: RunStatus) -> str:
    marks = {"pending": ".", "requested": ">", "awaiting_approval": "?", "queued": "=", "running": "~", "done": "+",
             "skipped": "-", "unavailable": "!", "failed": "x"}
    return " ".join(f"{s.step}{marks.get(s.state, '?')}" for s in status.steps)


def plan_expected_s(step: str, plan: dict[str, Any]) -> float | None:
    """The time the step's stored plan allows between two of its events; None when it says nothing."""
    if step == "training" and isinstance(plan.get("timeout_s"), int | float):
        return float(plan["timeout_s"]) + float(plan.get("kill_grace_s") or 0) + TRAINING_AFTER_TIMEOUT_S
    if step == "bench" and isinstance(plan.get("readiness_timeout_s"), int | float):
        return float(plan["readiness_timeout_s"]) + BENCH_WINDOW_S
    return None


def next_step(status: RunStatus) -> StepState | None:
    """The first step neither done nor skipped; None when the run finished or halted."""
    if status.halted:
        return None
    return next((s for s in status.steps if s.state not in ("done", "skipped")), None)


def _parse(stamp: str) -> datetime | None:
    try:
        return datetime.fromisoformat(stamp)
    except ValueError:
        return None


def _span(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds} s"


def find_stall(
    status: RunStatus, events: Iterable[dict[str, Any]], *, now: datetime,
    expected: Callable[[str], tuple[float, Literal["plan", "default"]]] | None = None,
) -> RunStatus:
    """`status` with `stalled` set (and said in the step's detail) when its next step has had no
    event for longer than `expected(step)` (default: STEP_EXPECTED_S); otherwise unchanged.

    The clock starts at the run's last event, whatever step it was of: the event that made
    the step due (the previous step's completion), or the step's own latest progress
    (training.started, bench.trial.completed)."""
    step = next_step(status)
    if step is None or step.state in NOT_STALLED:
        return status
    stamped = [(at, e) for e in events if e.get("run_id") == status.run_id
               if (at := _parse(str(e.get("produced_at", "")))) is not None]
    if not stamped:
        return status
    since, last = max(stamped, key=lambda pair: pair[0])
    expected_s, source = (expected or (lambda name: (STEP_EXPECTED_S[name], "default")))(step.step)
    waiting_s = (now - since).total_seconds()
    if waiting_s <= expected_s:
        return status
    # Publishes the step's trigger again from the bundle (services/app/runs/resume.py); idempotent.
    resume = f"specdec resume {status.run_id}"
    hint = (f"no event for {_span(waiting_s)} (expected within {_span(expected_s)}, from the {source}): check that "
            f"the {step.step} step's service runs (its /health) and `specdec dlq list`, then resume with `{resume}`")
    stall = Stall(step=step.step, state=step.state, since=since.isoformat(), last_event=str(last.get("schema")),
                  waiting_s=round(waiting_s, 1), expected_s=expected_s, expected_from=source, resume=resume, hint=hint)
    steps = [s.model_copy(update={"detail": f"STALLED: {hint}" + (f" (last: {s.detail})" if s.detail else "")})
             if s.step == step.step else s for s in status.steps]
    return status.model_copy(update={"stalled": stall, "steps": steps})
