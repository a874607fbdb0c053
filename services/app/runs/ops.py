"""Use cases over a running pipeline: approve, request, status, watch, the dead-letter stream.

Each returns what happened as data (the event published, the plans approved, the
records read); the CLI and the MCP server render it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from contracts.envelope import ArtifactRef, Strict
from contracts.inputs import input_problem
from contracts.streams import PROGRESS_SCHEMA
from services.app.context import Session, operator, patiently
from services.app.runs.progress import STEP_EXPECTED_S, RunStatus, find_stall, one_line, plan_expected_s, run_status
from services.app.runs.streams import dead_letters, follow, untaken
from services.runtime.bundle.bundle import BundleError
from services.runtime.errors import ConfigurationError

# The event models (and the campaign schema under them) load where an event is built:
# status, watch and dlq list only read dicts off the streams (docs/perf.md, "bench_cli").

PLANNED = ("training.planned", "bench.planned")


def pending_plans(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Plans of a run that no run.approved event covers yet."""
    approved = {sha for e in events if e.get("schema") == "run.approved" for sha in e.get("plan_sha256s", [])}
    return [e for e in events if e.get("schema") in PLANNED and e["plan"]["sha256"] not in approved]


class ApprovedPlan(Strict):
    """One plan an approval covers."""

    schema_name: str = Field(description="The event that announced the plan (training.planned or bench.planned).")
    uri: str = Field(description="bundle://RUN_ID/<step>/plan.json.")
    sha256: str = Field(description="The plan's hash, which the approval names.")


class Approved(Strict):
    """The run.approved event published, and the plans it covers."""

    run_id: str = Field(description="The run.")
    event_id: str = Field(description="ID of the run.approved event.")
    plan_sha256s: list[str] = Field(description="The plan hashes it approves; the services run those plans.")
    plans: list[ApprovedPlan] = Field(description="Each approved plan, in the order named.")


async def approve(session: Session, run_id: str, *, acknowledged: bool) -> Approved:
    """Approve every plan of the run that no approval covers yet."""
    if not acknowledged:
        raise ConfigurationError(
            "approving a run changes the cluster; pass --i-understand-this-mutates-cluster to approve"
        )
    plans = pending_plans(await journal(session, run_id))
    if not plans:
        raise ConfigurationError(
            f"run {run_id} has no plan awaiting approval; `specdec status {run_id}` shows where it is"
        )
    return await _publish_approval(session, run_id, plans)


async def approve_plans(session: Session, run_id: str, plan_sha256s: list[str], *, acknowledged: bool) -> Approved:
    """Approve the run's pending plans whose hashes are named, and only those: a hash that
    is not a plan of the run awaiting approval is refused, and nothing is published."""
    if not acknowledged:
        raise ConfigurationError(
            "approving plans changes the cluster; give the typed acknowledgement i_understand_this_mutates_cluster"
        )
    if not plan_sha256s:
        raise ConfigurationError(f"name the sha256 of each plan of run {run_id} to approve; "
                                 f"`specdec status {run_id}` and the plans show them")
    plans = pending_plans(await journal(session, run_id))
    by_hash = {plan["plan"]["sha256"]: plan for plan in plans}
    unknown = [sha for sha in plan_sha256s if sha not in by_hash]
    if unknown:
        waiting = ", ".join(f"{plan['schema']} {sha}" for sha, plan in by_hash.items()) or "none"
        raise ConfigurationError(f"run {run_id} has no plan awaiting approval with sha256 {', '.join(unknown)}; "
                                 f"awaiting approval: {waiting}")
    return await _publish_approval(session, run_id, [by_hash[sha] for sha in dict.fromkeys(plan_sha256s)])


async def _publish_approval(session: Session, run_id: str, plans: list[dict[str, Any]]) -> Approved:
    """Publish the run.approved event through the operator's Redis user (services/app/runs/approval.py)."""
    from services.app.runs.approval import publish_approval

    event = await publish_approval(session, run_id, [plan["plan"]["sha256"] for plan in plans])
    return Approved(
        run_id=run_id,
        event_id=event.event_id,
        plan_sha256s=event.plan_sha256s,
        plans=[
            ApprovedPlan(schema_name=plan["schema"], uri=plan["plan"]["uri"], sha256=plan["plan"]["sha256"])
            for plan in plans
        ],
    )


def parse_inputs(items: list[str], run_id: str, session: Session, *, step: str) -> dict[str, ArtifactRef]:
    """NAME=bundle://... pairs; each NAME one the step reads (contracts/inputs.py), each
    URI an artifact recorded in a bundle. Every unknown name is refused before any lookup."""
    pairs = [(item, *item.partition("=")) for item in items]
    for item, _, sep, uri in pairs:
        if not sep or not uri.startswith("bundle://"):
            raise ConfigurationError(f"--input {item!r} must be NAME=bundle://RUN_ID/PATH")
    problem = input_problem(step, [name for _, name, _, _ in pairs])
    if problem:
        raise ConfigurationError(f"--input: {problem}")
    inputs: dict[str, ArtifactRef] = {}
    for _, name, _, uri in pairs:
        source_run, _, relpath = uri.removeprefix("bundle://").partition("/")
        inputs[name] = session.bundle.ref(source_run, relpath)
    return inputs


async def request(session: Session, step: str, run_id: str, *, inputs: list[str], reason: str | None) -> str:
    from contracts.events import REQUESTED

    if step not in REQUESTED:
        raise ConfigurationError(f"unknown step {step!r}; one of: {', '.join(REQUESTED)}")
    event = REQUESTED[step](
        run_id=run_id,
        producer=f"cli/{operator()}",
        requested_by=operator(),
        inputs=parse_inputs(inputs, run_id, session, step=step),
        reason=reason,
    )
    await session.bus.publish(event)
    return event.event_id


async def journal(session: Session, run_id: str) -> list[dict[str, Any]]:
    """Every event of the run: its bundle's journal, and what the journal has not taken from the streams yet.

    The streams are read first: an event the journal takes meanwhile is then in events.jsonl when it
    is read (docs/delivery.md, "Trimming"). Neither read grows with the streams' length."""
    events = {e["event_id"]: e for e in await untaken(session.client, session.settings.stream_prefix, run_id)}
    if session.bundle.exists(run_id):
        for event in session.bundle.events(run_id):
            events.setdefault(event["event_id"], event)
    return list(events.values())


async def status(session: Session, run_id: str) -> RunStatus:
    """Each step's state; `stalled` names the step the run waits on when it has had no event for
    longer than that step's expected time (docs/delivery.md, "Stalled runs")."""
    events = await patiently(lambda: journal(session, run_id), what=f"reading run {run_id}")
    if not events:
        raise ConfigurationError(f"no event of run {run_id} on {session.settings.stream_prefix}.* nor in its bundle")
    from datetime import UTC, datetime

    from services.app.runs.rounds_status import rounds_cost

    found = find_stall(await bench_queued(session, run_status(run_id, events)), events, now=datetime.now(UTC),
                       expected=lambda step: expected_time(session, run_id, step))
    return found.model_copy(update={"rounds": rounds_cost(session.bundle, run_id)})


async def bench_queued(session: Session, found: RunStatus) -> RunStatus:
    """A bench waiting for another run's bench on its node (services/bench/node_lock.py) is `queued`, behind that run:
    waiting on a run, not stalled. Asked only while the bench step is neither running nor finished."""
    from services.bench import node_lock
    from services.runtime.delivery.ledger import RedisLedger

    bench = next(s for s in found.steps if s.step == "bench")
    if bench.state not in ("pending", "requested", "awaiting_approval"):
        return found
    waiting = await node_lock.queued(RedisLedger(session.client, session.settings.stream_prefix), found.run_id)
    if waiting is None:
        return found
    node, behind = waiting
    queued = bench.model_copy(
        update={"state": "queued", "detail": f"queued behind {behind or 'another run'} (node {node})"}
    )
    return found.model_copy(update={"steps": [queued if s.step == "bench" else s for s in found.steps]})


def expected_time(session: Session, run_id: str, step: str) -> tuple[float, Literal["plan", "default"]]:
    """How long `step` may go without an event: from its stored plan where there is one, else the default."""
    from contracts.layout import PLAN_PATHS
    from services.runtime.bundle.bundle import BundleError

    if step in PLAN_PATHS and session.bundle.exists(run_id):
        try:
            plan = session.bundle.read_json(run_id, PLAN_PATHS[step])
        except (BundleError, OSError, ValueError):
            plan = None  # no plan yet, or one that cannot be trusted: the default applies
        seconds = plan_expected_s(step, plan) if isinstance(plan, dict) else None
        if seconds is not None:
            return seconds, "plan"
    return STEP_EXPECTED_S[step], "default"


class WatchedEvent(Strict):
    """One event as `watch` shows it: when, which run, what, and the run's step progress after it."""

    stamp: str = Field(description="The event's produced_at time of day (HH:MM:SS, UTC).")
    run_id: str = Field(description="The event's run.")
    schema_name: str = Field(description="The event's schema, e.g. bench.trial.completed.")
    progress: str = Field(description="Every step of the run in one line, after this event (progress.one_line).")


def progress_of(event: dict[str, Any]) -> Any:
    """A step.progress entry as its typed event; None for any other event, or one this code cannot read."""
    if event.get("schema") != PROGRESS_SCHEMA:
        return None
    from pydantic import ValidationError

    from contracts.progress import StepProgress

    try:
        return StepProgress.model_validate(event)
    except ValidationError:
        return None  # another version, or garbled: progress is shown, never relied on


async def watch(
    session: Session, run_id: str | None, *, on_event: Callable[[WatchedEvent], None], from_start: bool,
    timeout_s: float | None, until_idle_s: float | None = None, on_progress: Callable[[Any], None] | None = None,
) -> int:
    """Each event of the run (every run without one) as it arrives, with its run's step progress, handed
    to `on_event`; with `on_progress`, each step.progress of the run too (a StepProgress: contracts/progress.py),
    which is not counted as an event shown; returns how many were shown when `timeout_s` or `until_idle_s` ran out."""
    seen: dict[str, list[dict[str, Any]]] = {}
    shown = 0
    started = last_event = time.monotonic()
    async for event in follow(session.client, session.settings.stream_prefix, from_start=from_start,
                              progress=on_progress is not None):
        now = time.monotonic()
        if event is not None and event.get("schema") == PROGRESS_SCHEMA:
            progress = progress_of(event)
            if on_progress is not None and progress is not None and run_id in (None, progress.run_id):
                on_progress(progress)
        elif event is not None and (run_id is None or event.get("run_id") == run_id):
            run = str(event.get("run_id"))
            seen.setdefault(run, []).append(event)
            on_event(WatchedEvent(stamp=str(event.get("produced_at", ""))[11:19], run_id=run,
                                  schema_name=str(event.get("schema")), progress=one_line(run_status(run, seen[run]))))
            shown += 1
            last_event = now
        if timeout_s is not None and now - started >= timeout_s:
            return shown
        if until_idle_s is not None and now - last_event >= until_idle_s:
            return shown
    return shown


class DeadLetter(Strict):
    """One entry of the dead-letter stream, and whether it was replayed."""

    record: dict[str, Any] = Field(description="The dead-letter record as stored: dead_letter_id, kind, service, "
                                   "stream, run_id, delivery_count, reason, payload, ...")
    replayed: bool = Field(description="True once `dlq replay` put its payload back on its stream.")


async def dlq_list(session: Session) -> list[DeadLetter]:
    """Every dead letter, oldest first."""
    records = [data for _, data in await dead_letters(session.client, session.settings.stream_prefix)]
    return [
        DeadLetter(record=r, replayed=bool(await session.client.exists(_replayed_key(session, r["dead_letter_id"]))))
        for r in records
    ]


def _replayed_key(session: Session, dead_letter_id: str) -> str:
    return f"{session.settings.stream_prefix}:dlq:replayed:{dead_letter_id}"


async def dlq_replay(session: Session, dead_letter_id: str) -> str:
    """Put a dead letter's original payload back on its stream, once.

    The step's dead mark in the run's bundle is superseded first (services/runtime/delivery/tally.py),
    so that catch-up takes the step up again should Redis lose the replayed entry; a publish that
    fails after it leaves the step live for catch-up, and a second replay publishes it."""
    for _, record in await dead_letters(session.client, session.settings.stream_prefix):
        if record.get("dead_letter_id") != dead_letter_id:
            continue
        marker = _replayed_key(session, dead_letter_id)
        if not await session.client.set(marker, operator(), nx=True):
            raise ConfigurationError(f"dead letter {dead_letter_id} was already replayed")
        run_id = record.get("run_id")
        if run_id and session.bundle.exists(run_id):
            from services.runtime.delivery.tally import record_replay

            try:
                await asyncio.to_thread(record_replay, session.bundle, run_id, dead_letter_id, operator())
            except BaseException as exc:
                await session.client.delete(marker)  # not replayed: a later replay may try again
                if isinstance(exc, (BundleError, OSError)):
                    raise ConfigurationError(
                        f"cannot mark dead letter {dead_letter_id} replayed in run {run_id}'s bundle ({exc}); "
                        "check that SPECDEC_BUNDLE_ROOT is the services' bundle and writable here") from None
                raise
        headers = {"schema": record.get("event_schema") or "", "run_id": record.get("run_id") or "",
                   "replay_of": dead_letter_id, "content-type": "application/json"}
        try:
            await session.bus.publish_raw(record["stream"], record["payload"].encode(), headers, dead_letter_id)
        except BaseException:
            # Not replayed after all: let a later replay try again.
            await session.client.delete(marker)
            raise
        return record["stream"]
    raise ConfigurationError(f"no dead letter {dead_letter_id}; `specdec dlq list` shows them")
