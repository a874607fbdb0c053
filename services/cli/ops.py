"""Operator commands over a running pipeline: approve, request, status, watch, dlq."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TextIO

import orjson

from contracts.envelope import ArtifactRef
from contracts.inputs import input_problem
from services.cli.context import Cli, operator
from services.cli.progress import RunStatus, one_line, run_status
from services.cli.streams import dead_letters, follow, run_events
from services.runtime.errors import ConfigurationError

if TYPE_CHECKING:
    # The event models (and the campaign schema under them) load where an event is built:
    # status, watch and dlq list only read dicts off the streams (docs/perf.md, "bench_cli").
    from contracts.events import RunApproved

PLANNED = ("training.planned", "bench.planned")


def pending_plans(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Plans of a run that no run.approved event covers yet."""
    approved = {sha for e in events if e.get("schema") == "run.approved" for sha in e.get("plan_sha256s", [])}
    return [e for e in events if e.get("schema") in PLANNED and e["plan"]["sha256"] not in approved]


async def approve(cli: Cli, run_id: str, *, acknowledged: bool, out: TextIO) -> RunApproved:
    """Approve every plan of the run that no approval covers yet."""
    if not acknowledged:
        raise ConfigurationError(
            "approving a run changes the cluster; pass --i-understand-this-mutates-cluster to approve"
        )
    plans = pending_plans(await run_events(cli.client, cli.settings.stream_prefix, run_id))
    if not plans:
        raise ConfigurationError(f"run {run_id} has no plan awaiting approval; `specdec status {run_id}` shows where it is")
    return await _publish_approval(cli, run_id, plans, out)


async def approve_plans(cli: Cli, run_id: str, plan_sha256s: list[str], *, acknowledged: bool, out: TextIO) -> RunApproved:
    """Approve the run's pending plans whose hashes are named, and only those: a hash that
    is not a plan of the run awaiting approval is refused, and nothing is published."""
    if not acknowledged:
        raise ConfigurationError(
            "approving plans changes the cluster; give the typed acknowledgement i_understand_this_mutates_cluster"
        )
    if not plan_sha256s:
        raise ConfigurationError(f"name the sha256 of each plan of run {run_id} to approve; "
                                 f"`specdec status {run_id}` and the plans show them")
    plans = pending_plans(await run_events(cli.client, cli.settings.stream_prefix, run_id))
    by_hash = {plan["plan"]["sha256"]: plan for plan in plans}
    unknown = [sha for sha in plan_sha256s if sha not in by_hash]
    if unknown:
        waiting = ", ".join(f"{plan['schema']} {sha}" for sha, plan in by_hash.items()) or "none"
        raise ConfigurationError(f"run {run_id} has no plan awaiting approval with sha256 {', '.join(unknown)}; "
                                 f"awaiting approval: {waiting}")
    return await _publish_approval(cli, run_id, [by_hash[sha] for sha in dict.fromkeys(plan_sha256s)], out)


async def _publish_approval(cli: Cli, run_id: str, plans: list[dict[str, Any]], out: TextIO) -> RunApproved:
    from contracts.events import RunApproved

    for plan in plans:
        out.write(f"approving {plan['schema']}: {plan['plan']['uri']} sha256={plan['plan']['sha256']}\n")
    event = RunApproved(
        run_id=run_id,
        producer=f"cli/{operator()}",
        i_understand_this_mutates_cluster=True,
        plan_sha256s=[plan["plan"]["sha256"] for plan in plans],
        approved_by=operator(),
    )
    await cli.bus.publish(event)
    return event


def parse_inputs(items: list[str], run_id: str, cli: Cli, *, step: str) -> dict[str, ArtifactRef]:
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
        inputs[name] = cli.bundle.ref(source_run, relpath)
    return inputs


async def request(cli: Cli, step: str, run_id: str, *, inputs: list[str], reason: str | None) -> str:
    from contracts.events import REQUESTED

    if step not in REQUESTED:
        raise ConfigurationError(f"unknown step {step!r}; one of: {', '.join(REQUESTED)}")
    event = REQUESTED[step](
        run_id=run_id,
        producer=f"cli/{operator()}",
        requested_by=operator(),
        inputs=parse_inputs(inputs, run_id, cli, step=step),
        reason=reason,
    )
    await cli.bus.publish(event)
    return event.event_id


async def journal(cli: Cli, run_id: str) -> list[dict[str, Any]]:
    """Every event of the run: on the streams, and in its bundle's journal (which outlives a trimmed stream)."""
    events = {e["event_id"]: e for e in await run_events(cli.client, cli.settings.stream_prefix, run_id)}
    if cli.bundle.exists(run_id):
        for event in cli.bundle.events(run_id):
            events.setdefault(event["event_id"], event)
    return list(events.values())


async def status(cli: Cli, run_id: str) -> RunStatus:
    events = await journal(cli, run_id)
    if not events:
        raise ConfigurationError(f"no event of run {run_id} on {cli.settings.stream_prefix}.* nor in its bundle")
    return run_status(run_id, events)


def render_status(result: RunStatus) -> str:
    lines = [f"run {result.run_id}: {result.events} events{' - HALTED' if result.halted else ''}"]
    for step in result.steps:
        lines.append(f"  {step.step:<9} {step.state:<18} {step.detail or ''}".rstrip())
    return "\n".join(lines)


async def watch(
    cli: Cli, run_id: str | None, *, out: TextIO, from_start: bool, timeout_s: float | None, until_idle_s: float | None = None
) -> int:
    """One line per event, with each run's step progress; returns the events shown."""
    seen: dict[str, list[dict[str, Any]]] = {}
    shown = 0
    started = last_event = time.monotonic()
    async for event in follow(cli.client, cli.settings.stream_prefix, from_start=from_start):
        now = time.monotonic()
        if event is not None and (run_id is None or event.get("run_id") == run_id):
            run = str(event.get("run_id"))
            seen.setdefault(run, []).append(event)
            progress = one_line(run_status(run, seen[run]))
            stamp = str(event.get("produced_at", ""))[11:19]
            out.write(f"{stamp} {run} {str(event.get('schema')):<22} {progress}\n")
            out.flush()
            shown += 1
            last_event = now
        if timeout_s is not None and now - started >= timeout_s:
            return shown
        if until_idle_s is not None and now - last_event >= until_idle_s:
            return shown
    return shown


async def dlq_list(cli: Cli, out: TextIO, *, as_json: bool) -> list[dict[str, Any]]:
    records = [data for _, data in await dead_letters(cli.client, cli.settings.stream_prefix)]
    if as_json:
        out.write(orjson.dumps(records, option=orjson.OPT_INDENT_2).decode() + "\n")
        return records
    if not records:
        out.write("dead-letter stream is empty\n")
    for r in records:
        replayed = await cli.client.exists(_replayed_key(cli, r["dead_letter_id"]))
        out.write(
            f"{r['dead_letter_id']}  {r['kind']:<9} {r['service']:<13} {r['stream']}  run={r.get('run_id') or '-'}"
            f"  deliveries={r['delivery_count']}{'  (replayed)' if replayed else ''}\n    {r['reason']}\n"
        )
    return records


def _replayed_key(cli: Cli, dead_letter_id: str) -> str:
    return f"{cli.settings.stream_prefix}:dlq:replayed:{dead_letter_id}"


async def dlq_replay(cli: Cli, dead_letter_id: str) -> str:
    """Put a dead letter's original payload back on its stream, once."""
    for _, record in await dead_letters(cli.client, cli.settings.stream_prefix):
        if record.get("dead_letter_id") != dead_letter_id:
            continue
        marker = _replayed_key(cli, dead_letter_id)
        if not await cli.client.set(marker, operator(), nx=True):
            raise ConfigurationError(f"dead letter {dead_letter_id} was already replayed")
        headers = {"schema": record.get("event_schema") or "", "run_id": record.get("run_id") or "",
                   "replay_of": dead_letter_id, "content-type": "application/json"}
        try:
            await cli.bus.publish_raw(record["stream"], record["payload"].encode(), headers, dead_letter_id)
        except BaseException:
            # Not replayed after all: let a later replay try again.
            await cli.client.delete(marker)
            raise
        return record["stream"]
    raise ConfigurationError(f"no dead letter {dead_letter_id}; `specdec dlq list` shows them")
