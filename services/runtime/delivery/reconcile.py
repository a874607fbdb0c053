"""Reconcile: clean labelled work that no live instance holds, and never live work after a reset.

Processes are selected by label only: this service's and this deployment's, whose run no in-flight lease
names. After a detected reset nothing is cleaned until the settle period has let every live owner take
its lease back, and the runs this instance runs itself are never cleaned
(docs/delivery.md#reconcile-after-a-reset).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from services.runtime.delivery.ledger import Ledger
from services.runtime.processes.procs import Labelled, kill_group, labelled_processes

# How many heartbeat periods a service waits after a detected reset before it reads the
# leases to clean: one full period, in which every live owner beats (and takes its
# lease back), and half a period more for a beat delayed by the reconnect itself
# (a stale pooled connection, a beat that was in flight when Redis went away).
SETTLE_HEARTBEATS = 1.5


class Holders(Protocol):
    """What reconcile reads of the ledger: the in-flight leases of a service."""

    async def holders(self, service: str) -> dict[str, str]: ...


def settle_period_s(heartbeat_s: float) -> float:
    """How long after a detected reset a service cleans nothing (SETTLE_HEARTBEATS heartbeats)."""
    return SETTLE_HEARTBEATS * heartbeat_s


async def reconcile(
    service: str, ledger: Holders, *, deployment: str, grace_s: float = 5.0, keep_runs: Callable[[], set[str]] = set,
    scan: Callable[..., list[Labelled]] = labelled_processes, kill: Callable[..., None] = kill_group,
) -> list[Labelled]:
    """Kill this service's labelled process groups whose run no lease holds, now (no reset rule: see Reconciler).

    `keep_runs` names runs never to clean (the ones this instance runs); it is asked
    after the process scan, so a child started by a step that began meanwhile is kept.
    """
    held_runs = {key.split(":", 2)[1] for key in await ledger.holders(service)}
    found = scan(service, deployment=deployment)
    keep = held_runs | keep_runs()
    cleaned = []
    seen_groups: set[int] = set()
    for proc in found:
        if proc.run_id in keep or proc.pgid in seen_groups or proc.pgid == os.getpgrp():
            continue
        seen_groups.add(proc.pgid)
        kill(proc.pgid, grace_s=grace_s)
        cleaned.append(proc)
    return cleaned


class Reconciler:
    """One service instance's reconcile, with the reset rule (module docstring).

    `note_reset(reason)` is what the reset signals call; `at_start()` runs the start
    pass (at once, or after the settle period when a reset is known); a reset noticed
    while the service runs schedules one more pass. `clock` and `sleep` are injectable
    so the rule is tested on a scripted clock.
    """

    def __init__(
        self, service: str, ledger: Ledger, *, deployment: str, settle_s: float,
        keep_runs: Callable[[], set[str]] = set, log: Any = None, grace_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        scan: Callable[..., list[Labelled]] = labelled_processes, kill: Callable[..., None] = kill_group,
        after_pass: Callable[[], None] | None = None, lost_state: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        self.service = service
        # Asked when the ledger is young at start: why Redis is known to have held this deployment's
        # state before (history.py), or None for a fresh Redis, which lost nothing (said at info, not
        # warned). Without it a young ledger is taken as a loss.
        self.lost_state = lost_state
        # Called after each pass (start, and each settled reset): the service then takes up the runs
        # waiting on it from the bundle (services/runtime/delivery/catchup.py), once live owners hold their leases
        # again.
        self.after_pass = after_pass
        self.ledger = ledger
        self.deployment = deployment
        self.settle_s = settle_s
        self.keep_runs = keep_runs
        self.log = log or structlog.get_logger().bind(service=service)
        self.grace_s = grace_s
        self.clock = clock
        self.sleep = sleep
        self.scan = scan
        self.kill = kill
        # When the last reset was noticed (clock time); None: none since this instance started.
        self.reset_at: float | None = None
        self.pass_task: asyncio.Task[None] | None = None
        # A reset noticed while a pass was already past its read: one more pass follows.
        self._again = False
        self.cleaned: list[Labelled] = []
        self._unanswered = False  # the last read of the leases found Redis gone

    def settled_in_s(self, now: float) -> float:
        """Seconds until cleaning may go on; 0 when no reset is waiting out its settle period."""
        if self.reset_at is None:
            return 0.0
        return max(0.0, self.reset_at + self.settle_s - now)

    def note_reset(self, reason: str, *, ago_s: float = 0.0, schedule: bool = True, say: bool = True) -> None:
        """Redis lost its state `ago_s` seconds ago (the reason says how it was seen):
        no cleaning until the settle period after it has passed. One warning per reset:
        signals arriving while one is being waited out only move its start."""
        at = self.clock() - ago_s
        waiting = self.settled_in_s(self.clock()) > 0
        if self.reset_at is None or at > self.reset_at:
            self.reset_at = at
        if not waiting and say:
            self.log.warning(
                "Redis lost its leases (restart, flush, failover or a long outage); cleaning no labelled work "
                "until live owners have re-registered theirs", reason=reason,
                wait_s=round(self.settled_in_s(self.clock()), 1),
            )
        if not schedule:
            return
        if self.pass_task is not None:
            self._again = True
            return
        try:
            self.pass_task = asyncio.get_running_loop().create_task(self._scheduled_pass())
        except RuntimeError:
            pass  # no loop (a synchronous caller): the next at_start or run_pass applies the rule

    async def _scheduled_pass(self) -> None:
        try:
            while True:
                self._again = False
                await self.run_pass()
                if not self._again:
                    return
        finally:
            self.pass_task = None

    async def run_pass(self) -> list[Labelled]:
        """Clean unheld labelled work once no reset is being waited out; the leases are read only then."""
        while True:
            wait_s = self.settled_in_s(self.clock())
            if wait_s > 0:
                await self.sleep(wait_s)
                continue
            seen = self.reset_at
            try:
                held = await self.ledger.holders(self.service)
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                # Redis went away under the pass: when it answers again it may have lost the
                # leases too, so the pass waits out a settle period from then (and is not lost).
                # One warning for the outage, not one per attempt.
                self.note_reset(f"Redis did not answer the read of the leases ({type(exc).__name__})",
                                schedule=False, say=not self._unanswered)
                self._unanswered = True
                continue
            self._unanswered = False
            if self.reset_at != seen:
                continue  # a reset noticed during the read: its owners' leases are not back yet
            cleaned = await reconcile(
                self.service, _Held(held), deployment=self.deployment, grace_s=self.grace_s, keep_runs=self.keep_runs,
                scan=self.scan, kill=self.kill,
            )
            for proc in cleaned:
                self.log.warning("reconciled: killed unowned labelled process", pid=proc.pid, run_id=proc.run_id)
            self.cleaned.extend(cleaned)
            if self.after_pass is not None:
                self.after_pass()
            return cleaned

    async def at_start(self) -> list[Labelled]:
        """The start pass: at once when the ledger is older than the settle period (what it
        cleans is cleaned before the service serves); otherwise Redis lost its state not
        long ago, and the pass runs in the background once the period has passed."""
        age_s = await self.ledger.age_s()
        if age_s >= self.settle_s:
            return await self.run_pass()
        reason = (f"the ledger is {age_s:.1f} s old (Redis started empty, was flushed or failed over, or this "
                  "deployment is new)")
        lost = await self._lost_state()
        if lost is None:
            # Nothing says Redis held this deployment's state: a fresh Redis lost nothing. The settle
            # period is waited out all the same (instances of a new deployment may start together).
            self.note_reset(reason, ago_s=age_s, say=False)
            self.log.info("Redis holds no state of this deployment yet (a fresh Redis or a new deployment); "
                          "cleaning no labelled work until the settle period has passed",
                          wait_s=round(self.settled_in_s(self.clock()), 1))
            return []
        self.note_reset(f"{reason}; {lost}", ago_s=age_s)
        return []

    async def _lost_state(self) -> str | None:
        """Why Redis held this deployment's state before this young ledger; None when nothing says so."""
        running = [proc for proc in self.scan(self.service, deployment=self.deployment) if proc.pgid != os.getpgrp()]
        if running:
            return f"labelled work of this service runs ({', '.join(sorted({p.run_id for p in running}))})"
        if self.lost_state is None:
            return "nothing tells a fresh Redis from a lost one here"
        return await self.lost_state()

    async def close(self) -> None:
        """Cancel a pass still waiting (the service is stopping)."""
        if self.pass_task is not None:
            self.pass_task.cancel()
            try:
                await self.pass_task
            except asyncio.CancelledError:
                pass  # cancelled on purpose: nothing was cleaned
            self.pass_task = None


class _Held:
    """The leases a pass read, for `reconcile` (which reads them again otherwise)."""

    def __init__(self, held: dict[str, str]) -> None:
        self.held = held

    async def holders(self, service: str) -> dict[str, str]:
        return self.held
