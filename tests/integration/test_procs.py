"""Labelled children: parent-death signal, reconcile by label only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from services.runtime.delivery.ledger import MemoryLedger, StepKey
from services.runtime.delivery.reconcile import reconcile
from services.runtime.processes.procs import (
    DEPLOYMENT_ENV,
    EXPERIMENT_ENV,
    deployment_id,
    kill_group,
    labelled_processes,
    spawn,
)
from tests.support.waiting import alive

SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]


def wait_dead(pid: int, timeout_s: float = 10) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_spawned_child_carries_the_label_and_its_own_group():
    child = spawn(SLEEP, run_id="toy-run-1", service="svc-label-test")
    try:
        found = [p for p in labelled_processes("svc-label-test") if p.pid == child.pid]
        assert found and found[0].run_id == "toy-run-1"
        assert os.getpgid(child.pid) == child.pid != os.getpgrp()
    finally:
        kill_group(child.pid, grace_s=1)
        child.wait()


def test_child_dies_with_its_parent(tmp_path):
    # A parent process spawns a labelled child, prints its pid, then is SIGKILLed.
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(os.getcwd())!r})
        from services.runtime.processes.procs import spawn
        child = spawn({SLEEP!r}, run_id="toy-run-2", service="svc-pdeath-test")
        print(child.pid, flush=True)
        time.sleep(120)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child_pid = int(parent.stdout.readline())
    assert alive(child_pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert wait_dead(child_pid), "a labelled child must die with its service"


@pytest.mark.asyncio
async def test_reconcile_kills_only_unheld_work_of_its_own_service(monkeypatch):
    monkeypatch.setenv(DEPLOYMENT_ENV, "toy@127.0.0.1:6379/0")
    ledger = MemoryLedger()
    held = spawn(SLEEP, run_id="toy-held-run", service="svc-reconcile")
    orphan = spawn(SLEEP, run_id="toy-orphan-run", service="svc-reconcile")
    other = spawn(SLEEP, run_id="toy-orphan-run", service="svc-someone-else")
    unlabelled = subprocess.Popen(SLEEP, start_new_session=True,
                                  env={k: v for k, v in os.environ.items() if k != EXPERIMENT_ENV})
    try:
        await ledger.begin(StepKey("svc-reconcile", "toy-held-run", "training.requested", "step"), "me", 60_000)
        cleaned = await reconcile("svc-reconcile", ledger, deployment="toy@127.0.0.1:6379/0", grace_s=1)
        assert [p.pid for p in cleaned] == [orphan.pid]
        orphan.wait(timeout=5)
        assert not alive(orphan.pid)
        assert alive(held.pid) and alive(other.pid) and alive(unlabelled.pid)
    finally:
        for proc in (held, orphan, other, unlabelled):
            if proc.poll() is None:
                kill_group(proc.pid, grace_s=1)
            proc.wait()


@pytest.mark.asyncio
async def test_reconcile_leaves_another_deployments_work_alone(monkeypatch):
    """Two deployments (different stream prefixes) on one host: a restarted service of one
    kills its own unheld work and never the other's, nor work without a deployment label."""
    ours = deployment_id("redis://u:secret@127.0.0.1:6379/0", "dep-a")
    theirs = deployment_id("redis://127.0.0.1:6379/0", "dep-b")
    assert ours == "dep-a@127.0.0.1:6379/0" and "secret" not in ours
    monkeypatch.setenv(DEPLOYMENT_ENV, ours)
    our_orphan = spawn(SLEEP, run_id="toy-dep-run", service="svc-deploy")
    monkeypatch.setenv(DEPLOYMENT_ENV, theirs)
    their_work = spawn(SLEEP, run_id="toy-dep-run", service="svc-deploy")
    monkeypatch.delenv(DEPLOYMENT_ENV)
    no_label = spawn(SLEEP, run_id="toy-dep-run", service="svc-deploy")
    try:
        found = {p.pid: p.deployment for p in labelled_processes("svc-deploy")}
        assert found[our_orphan.pid] == ours and found[their_work.pid] == theirs and found[no_label.pid] is None
        cleaned = await reconcile("svc-deploy", MemoryLedger(), deployment=ours, grace_s=1)
        assert [p.pid for p in cleaned] == [our_orphan.pid]
        our_orphan.wait(timeout=5)
        assert alive(their_work.pid) and alive(no_label.pid)
    finally:
        for proc in (our_orphan, their_work, no_label):
            if proc.poll() is None:
                kill_group(proc.pid, grace_s=1)
            proc.wait()
