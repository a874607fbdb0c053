"""Reconcile never kills live work (services/runtime/delivery/reconcile.py): the reset rule on a scripted clock.

After Redis lost its leases, a live owner takes its lease back on its next heartbeat.
A reconcile that read the leases before then would see the live run as unowned and
kill its servers; the Reconciler reads them only once a settle period (a heartbeat
and a half) has passed since the last reset it noticed.
"""

from __future__ import annotations

import asyncio

import pytest

from services.runtime.delivery.ledger import MemoryLedger, StepKey
from services.runtime.delivery.reconcile import Reconciler, settle_period_s
from services.runtime.processes.procs import Labelled

SERVICE = "bench-runner"
DEPLOYMENT = "toy@127.0.0.1:6379/0"
HEARTBEAT_S = 10.0
LIVE, ORPHAN, MINE = "toy-live-run", "toy-orphan-run", "toy-my-run"


class Script:
    """A scripted clock and the world it drives: the live owner's lease vanishes at the
    reset and comes back at its next beat; processes are records, kills are logged."""

    def __init__(self, reset_at: float, beat_at: float) -> None:
        self.now = 100.0
        self.reset_at = reset_at
        self.beat_at = beat_at
        self.kills: list[tuple[str, float]] = []
        self.reads: list[float] = []
        self.procs = [Labelled(pid=pid, pgid=pid, run_id=run, service=SERVICE, deployment=DEPLOYMENT)
                      for pid, run in ((9001, LIVE), (9002, ORPHAN), (9003, MINE))]

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds

    async def holders(self, service: str) -> dict[str, str]:
        self.reads.append(self.now)
        live_holds = self.now < self.reset_at or self.now >= self.beat_at
        return {StepKey(SERVICE, LIVE, "bench.requested", "step").render(): "other-host/1-0"} if live_holds else {}

    async def age_s(self) -> float:
        return self.now - self.reset_at if self.now >= self.reset_at else 1e6

    def scan(self, service: str, *, deployment: str) -> list[Labelled]:
        assert (service, deployment) == (SERVICE, DEPLOYMENT)
        return [p for p in self.procs if p.run_id not in {run for run, _ in self.kills}]

    def kill(self, pgid: int, *, grace_s: float) -> None:
        self.kills.append(({p.pgid: p.run_id for p in self.procs}[pgid], self.now))

    def reconciler(self) -> Reconciler:
        return Reconciler(SERVICE, self,  # type: ignore[arg-type]  # the script stands in for the Ledger
                          deployment=DEPLOYMENT, settle_s=settle_period_s(HEARTBEAT_S), keep_runs=lambda: {MINE},
                          clock=self.clock, sleep=self.sleep, scan=self.scan, kill=self.kill)


def test_the_settle_period_is_a_heartbeat_and_a_half() -> None:
    assert settle_period_s(HEARTBEAT_S) == 15.0


async def test_a_start_right_after_a_reset_waits_for_the_owners_then_cleans_only_the_orphan() -> None:
    # Redis came back empty at t=100; the live owner's next beat is at t=108 (within a heartbeat).
    script = Script(reset_at=100.0, beat_at=108.0)
    script.now = 102.0  # this instance starts 2 s after the reset
    reconciler = script.reconciler()
    assert await reconciler.at_start() == []  # nothing now: the pass waits in the background
    assert script.kills == [] and script.reads == []
    await asyncio.wait_for(reconciler.pass_task, 1)  # type: ignore[arg-type]  # at_start scheduled it: not None
    assert script.reads == [115.0], "the leases are read once, a settle period after the reset"
    assert script.kills == [(ORPHAN, 115.0)], "the live run and this instance's own run are never cleaned"


async def test_an_old_ledger_is_reconciled_at_once_before_serving() -> None:
    script = Script(reset_at=0.0, beat_at=0.0)
    cleaned = await script.reconciler().at_start()
    assert [p.run_id for p in cleaned] == [ORPHAN] and script.kills == [(ORPHAN, 100.0)]


async def test_a_reset_while_the_pass_waits_restarts_its_wait() -> None:
    script = Script(reset_at=100.0, beat_at=123.0)
    reconciler = script.reconciler()
    reconciler.note_reset("consumer group recreated")
    assert reconciler.settled_in_s(script.now) == 15.0
    script.now = 110.0
    # A second loss (Redis restarted again): the owners' beats after it are what count.
    script.reset_at = 110.0
    reconciler.note_reset("a running step's lease had vanished")
    await asyncio.wait_for(reconciler.pass_task, 1)  # type: ignore[arg-type]  # note_reset scheduled it: not None
    assert script.reads == [125.0]
    assert script.kills == [(ORPHAN, 125.0)]


async def test_a_reset_noticed_during_the_read_is_waited_out_again() -> None:
    script = Script(reset_at=0.0, beat_at=0.0)
    reconciler = script.reconciler()
    real_holders = script.holders

    async def holders_with_a_reset(service: str) -> dict[str, str]:
        held = await real_holders(service)
        if len(script.reads) == 1:
            reconciler.note_reset("consumer group recreated", schedule=False)
        return held

    script.holders = holders_with_a_reset  # type: ignore[method-assign]  # the Ledger's read, now with a reset in it
    cleaned = await reconciler.run_pass()
    assert script.reads == [100.0, 115.0]
    assert [p.run_id for p in cleaned] == [ORPHAN]


async def test_without_a_loop_a_noticed_reset_still_binds_the_next_pass() -> None:
    script = Script(reset_at=100.0, beat_at=105.0)
    reconciler = script.reconciler()
    reconciler.note_reset("flushed", schedule=False)
    assert reconciler.pass_task is None
    await reconciler.run_pass()
    assert script.kills == [(ORPHAN, 115.0)]


@pytest.mark.parametrize("held_state", ["renewed", "retaken", "lost"])
async def test_renew_says_when_a_lease_had_vanished(held_state: str) -> None:
    from services.runtime.delivery.ledger import LOST, RENEWED, RETAKEN

    ledger, key = MemoryLedger(), StepKey(SERVICE, LIVE, "bench.requested", "step")
    await ledger.begin(key, "me", 60_000)
    if held_state == "retaken":
        ledger.inflight.clear()  # Redis lost the lease
    if held_state == "lost":
        ledger.inflight[key] = ("someone-else", ledger.inflight[key][1])
    expected = {"renewed": RENEWED, "retaken": RETAKEN, "lost": LOST}[held_state]
    assert await ledger.renew(key, "me", 60_000) == expected
