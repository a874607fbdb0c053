"""Processes on this machine still labelled with a run that no live service holds, and their cleanup.

What `specdec status` names and `specdec cleanup RUN_ID` ends (docs/delivery.md#stopping-and-restarting).
A run has a live service while any in-flight lease names it; only this deployment's processes (or
unlabelled ones) are considered, selected by the run's label alone, never by name or pid.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydantic import BaseModel, Field

from services.runtime.errors import SpecdecError
from services.runtime.processes.procs import Labelled, deployment_id, kill_group, labelled_processes

ACK_FLAG = "--i-understand-this-kills-processes"
# What a labelled process gets between SIGTERM and SIGKILL.
GRACE_S = 5.0


class RunHeld(SpecdecError):
    """A live service holds the run: its processes are that service's to end."""


class Leftover(BaseModel):
    """A process labelled with the run."""

    pid: int = Field(description="Process ID.")
    pgid: int = Field(description="Its process group (what cleanup ends).")
    service: str = Field(description="The service label (SPECDEC_SERVICE) it carries.")
    deployment: str | None = Field(description="The deployment label it carries; None when it has none.")


class Cleanup(BaseModel):
    """What `specdec cleanup` found and (when acknowledged) ended."""

    run_id: str = Field(description="The run.")
    processes: list[Leftover] = Field(description="The run's labelled processes that no live service holds.")
    ended_groups: list[int] = Field(description="Process groups ended; empty on a dry run.")
    dry_run: bool = Field(description="True when nothing was ended (not acknowledged).")


def _leftover(proc: Labelled) -> Leftover:
    return Leftover(pid=proc.pid, pgid=proc.pgid, service=proc.service, deployment=proc.deployment)


def labelled(session: Any, run_id: str) -> list[Labelled]:
    """The run's labelled processes of this deployment (or of none) on this machine."""
    settings = session.settings
    ours = deployment_id(settings.redis_url, settings.stream_prefix)
    return [p for p in labelled_processes() if p.run_id == run_id and p.deployment in (ours, None)]


async def holders(session: Any, run_id: str) -> list[str]:
    """In-flight leases (`<service>:<run>:<schema>:<step>`) naming the run."""
    marker = ":ledger:inflight:"
    pattern = f"{session.settings.stream_prefix}{marker}*"
    found = []
    async for raw in session.client.scan_iter(match=pattern, count=500):
        key = (raw.decode() if isinstance(raw, bytes) else raw).split(marker, 1)[1]
        if key.split(":", 2)[1:2] == [run_id]:
            found.append(key)
    return sorted(found)


async def unowned(session: Any, run_id: str) -> list[Leftover]:
    """The run's labelled processes when no live service holds the run; empty otherwise."""
    found = labelled(session, run_id)
    if not found or await holders(session, run_id):
        return []
    return [_leftover(p) for p in found]


def describe(run_id: str, leftovers: list[Leftover]) -> list[str]:
    """`specdec status`'s lines about them."""
    return [f"  labelled process pid {p.pid} (group {p.pgid}, service {p.service}) has no live service; "
            f"`specdec cleanup {run_id}` ends it" for p in leftovers]


async def cleanup(session: Any, run_id: str, *, acknowledged: bool) -> Cleanup:
    """End the run's labelled process groups when no live service holds the run; a dry run unless acknowledged."""
    held = await holders(session, run_id)
    if held:
        raise RunHeld(
            f"run {run_id} is held by a live service (in-flight: {', '.join(held)}); nothing was ended: stop that "
            "service (it ends its own processes) or wait for its step to end, then run cleanup again"
        )
    found = labelled(session, run_id)
    processes = [_leftover(p) for p in found]
    if not acknowledged:
        return Cleanup(run_id=run_id, processes=processes, ended_groups=[], dry_run=True)
    groups: list[int] = []
    for proc in found:
        if proc.pgid not in groups and proc.pgid != os.getpgrp():
            groups.append(proc.pgid)
    for pgid in groups:
        await asyncio.to_thread(kill_group, pgid, grace_s=GRACE_S)
    return Cleanup(run_id=run_id, processes=processes, ended_groups=groups, dry_run=False)
