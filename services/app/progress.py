"""Step states of a run, derived from its events (pure: no I/O)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import Field

from contracts.envelope import Strict
from contracts.steps import STEPS

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
        description="pending, requested, awaiting_approval, running, done, skipped, unavailable or failed."
    )
    detail: str | None = Field(default=None, description="Reason, decision or counts, in words.")
    last_event: str | None = Field(default=None, description="Schema of the last event about this step.")
    at: str | None = Field(default=None, description="When that event was produced (UTC, ISO 8601).")


class RunStatus(Strict):
    """Every step of a run, in flow order."""

    run_id: str = Field(description="The run.")
    events: int = Field(description="Events seen for the run.")
    halted: bool = Field(description="True when a step failed: the run stops there.")
    steps: list[StepState] = Field(description="Every step in flow order.")


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
            step=step, state=state, detail=event_detail(event), last_event=event["schema"], at=str(event.get("produced_at"))
        )
    halted = any(s.state == "failed" for s in states.values())
    return RunStatus(run_id=run_id, events=len(ordered), halted=halted, steps=list(states.values()))


def one_line(status: RunStatus) -> str:
    marks = {"pending": ".", "requested": ">", "awaiting_approval": "?", "running": "~", "done": "+",
             "skipped": "-", "unavailable": "!", "failed": "x"}
    return " ".join(f"{s.step}{marks.get(s.state, '?')}" for s in status.steps)
