"""`specdec resume RUN_ID`: derive a run's next step from its bundle and publish that step's trigger.

For a run whose trigger Redis lost while no service took it up from the bundle
(docs/delivery.md#runs-resume). The trigger is published again as it was (same event ID), or as a
`<step>.requested` whose ID is derived from the run: resuming twice publishes the same event.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import Field

from contracts.envelope import Strict
from services.app.context import Session, operator
from services.app.runs.ops import journal
from services.app.runs.progress import next_step, run_status
from services.runtime.errors import ConfigurationError

# The event that makes each step due (the flow of contracts/catalogue.py).
TRIGGERS: dict[str, str] = {
    "profile": "campaign.submitted",
    "corpus": "profile.completed",
    "capacity": "corpus.completed",
    "training": "capacity.selected",
    "bench": "training.completed",
    "gate": "bench.completed",
    "report": "gate.decided",
    "publish": "report.rendered",
}


class Resumed(Strict):
    """What `resume` did for a run."""

    run_id: str = Field(description="The run.")
    step: str | None = Field(description="The step the run waits on; null when it finished or halted.")
    state: str | None = Field(description="That step's state (pending, requested, running, awaiting_approval, ...).")
    published: str | None = Field(description="Schema of the event published; null when nothing was.")
    event_id: str | None = Field(description="Its event ID (the same on every resume of the same state).")
    source: Literal["journal", "request", "none"] = Field(
        description="journal: the trigger as the bundle knows it, published again; request: <step>.requested; "
        "none: nothing to publish.")
    detail: str = Field(description="What was done, or why nothing was, in words.")


def known_events(session: Session, streams_and_journal: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """The run's events from the streams and its journal, plus the outputs of its step records."""
    from services.runtime.delivery.catchup import known_events as in_bundle

    events = {e["event_id"]: e for e in streams_and_journal}
    if session.bundle.exists(run_id):
        for event in in_bundle(session.bundle, run_id):
            events.setdefault(str(event.get("event_id")), event)
    return sorted(events.values(), key=lambda e: str(e.get("produced_at", "")))


def _request_id(run_id: str, step: str, events: list[dict[str, Any]]) -> str:
    last = str(events[-1].get("event_id")) if events else ""
    return hashlib.sha256("\0".join((run_id, step, "resume", last)).encode()).hexdigest()[:32]


async def resume(session: Session, run_id: str) -> Resumed:
    """Publish the trigger of the run's next step (idempotent; module docstring)."""
    from contracts.events import REQUESTED
    from contracts.registry import default_registry

    events = known_events(session, await journal(session, run_id), run_id)
    if not events:
        raise ConfigurationError(f"no event of run {run_id} on {session.settings.stream_prefix}.* nor in its bundle")
    status = run_status(run_id, events)
    step = next_step(status)
    if step is None:
        why = "halted by a failure (see `specdec status`)" if status.halted else "finished"
        return Resumed(run_id=run_id, step=None, state=None, published=None, event_id=None, source="none",
                       detail=f"run {run_id} {why}: nothing to resume")
    if step.state in ("awaiting_approval", "unavailable"):
        return Resumed(run_id=run_id, step=step.step, state=step.state, published=None, event_id=None, source="none",
                       detail=f"the {step.step} step waits on an operator ({step.state}): "
                       + ("approve its plan with `specdec approve`" if step.state == "awaiting_approval"
                          else f"request it again with `specdec request {step.step} {run_id}` once capacity is idle"))
    # The step's latest trigger: the event that made it due, or an operator's request of it.
    triggers = (TRIGGERS[step.step], f"{step.step}.requested")
    trigger = next((e for e in reversed(events) if e.get("schema") in triggers), None)
    if trigger is not None:
        import orjson

        event = default_registry().parse(orjson.dumps(trigger))
        source: Literal["journal", "request"] = "journal"
    else:
        event = REQUESTED[step.step](run_id=run_id, producer=f"cli/{operator()}", requested_by=operator(),
                                     reason="specdec resume: the step's trigger is not in the bundle",
                                     event_id=_request_id(run_id, step.step, events))
        source = "request"
    await session.bus.publish(event)
    return Resumed(run_id=run_id, step=step.step, state=step.state, published=event.SCHEMA, event_id=event.event_id,
                   source=source, detail=f"published {event.SCHEMA} ({event.event_id}) "
                   + ("again, as the bundle recorded it" if source == "journal" else "(the trigger was not recorded)"))
