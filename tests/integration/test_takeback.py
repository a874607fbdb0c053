"""A killed bench-runner's servers: taken back by the run's next owner, by lease and label only.

A local server is a process group: its first process dies with the bench-runner (parent-death
signal), but a child of its own (vLLM's engine core) outlives it. These tests build that shape with
real processes: a "server" that starts an "engine" child, under a "bench-runner" that is SIGKILLed.
Ownership is read from a real Redis ledger.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import pytest_asyncio
import redis.asyncio as aioredis
import structlog

from services.bench.executors.execution import sole_owner
from services.bench.executors.executor import LocalExecutor
from services.cli.up import stop
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.ledger import RedisLedger, StepKey
from services.runtime.delivery.route import Lease, StepContext
from services.runtime.processes.procs import DEPLOYMENT_ENV, kill_group, labelled_processes, spawn
from services.runtime.settings import RuntimeSettings
from tests.support.waiting import alive

ROOT = Path(__file__).resolve().parents[2]
BENCH = "bench-runner"
DEPLOYMENT = "takeback@127.0.0.1:6379/0"

# A server whose engine is a child of its own, as `vllm serve` starts its engine core: the pid of
# each goes to stdout; the engine ignores its parent's death.
SERVER = textwrap.dedent("""
    import subprocess, sys, time
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    print(engine.pid, flush=True)
    time.sleep(120)
""")

# A bench-runner stand-in: it spawns the server through specdec's own spawn (labelled, own group,
# parent-death signal), prints the server's and the engine's pids, and waits to be killed.
RUNNER = textwrap.dedent("""
    import subprocess, sys, time
    sys.path.insert(0, {root!r})
    from services.runtime.processes.procs import spawn
    server = spawn([sys.executable, "-c", {server!r}], run_id=sys.argv[1], service="bench-runner",
                   stdout=subprocess.PIPE)
    print(server.pid, server.stdout.readline().decode().strip(), flush=True)
    time.sleep(120)
""")


def orphaned_engine(run_id: str) -> tuple[int, int]:
    """A bench-runner SIGKILLed mid-bench: (server pid, engine pid); the engine outlives it."""
    runner = subprocess.Popen([sys.executable, "-c", RUNNER.format(root=str(ROOT), server=SERVER), run_id],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, DEPLOYMENT_ENV: DEPLOYMENT})
    assert runner.stdout is not None
    server, engine = (int(pid) for pid in runner.stdout.readline().split())
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    deadline = time.monotonic() + 10
    while alive(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(server) and alive(engine), (
        "the shape under test: the server died with its runner, its engine did not")
    return server, engine


@pytest_asyncio.fixture
async def ledger(redis_url: str, prefix: str):
    client = aioredis.Redis.from_url(redis_url)
    yield RedisLedger(client, prefix)
    await client.aclose()


def context(ledger: RedisLedger, key: StepKey, owner: str) -> StepContext:
    return StepContext(service=BENCH, settings=RuntimeSettings(instance="takeback"), bus=None,  # type: ignore[arg-type]  # sole_owner reads no bus
                       log=structlog.get_logger(), lease=Lease(key=key.render(), owner=owner, ledger=ledger))


@pytest.mark.asyncio
async def test_the_runs_next_owner_ends_what_its_dead_owner_left_and_nothing_else(ledger, tmp_path, monkeypatch):
    monkeypatch.setenv(DEPLOYMENT_ENV, DEPLOYMENT)
    run_id = f"tb-{os.getpid()}-a"
    _, engine = orphaned_engine(run_id)
    other_run = spawn([sys.executable, "-c", "import time; time.sleep(120)"], run_id=f"{run_id}-other", service=BENCH)
    unlabelled = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        key = StepKey(BENCH, run_id, "run.approved", "step")
        assert await ledger.begin(key, "next/1-0", 10_000) == "begun"
        assert await sole_owner(context(ledger, key, "next/1-0")) is None
        ended = await LocalExecutor(run_id, BundleStore(tmp_path), take_back=True).prepare()
        assert len(ended) == 1 and "left by an earlier owner" in ended[0], ended
        assert not alive(engine), "the dead owner's engine must be ended"
        assert [p for p in labelled_processes() if p.run_id == run_id] == []
        assert alive(other_run.pid) and alive(unlabelled.pid), (
            "another run's process, or an unlabelled one, is never touched")
    finally:
        for proc in (other_run, unlabelled):
            kill_group(proc.pid, grace_s=1)
            proc.wait()
        kill_group(os.getpgid(engine), grace_s=1) if alive(engine) else None


@pytest.mark.asyncio
async def test_nothing_is_taken_back_while_another_instance_holds_work_of_the_run(ledger, tmp_path, monkeypatch):
    monkeypatch.setenv(DEPLOYMENT_ENV, DEPLOYMENT)
    run_id = f"tb-{os.getpid()}-b"
    _, engine = orphaned_engine(run_id)
    try:
        ours = StepKey(BENCH, run_id, "bench.requested", "req-2")
        theirs = StepKey(BENCH, run_id, "bench.requested", "req-1")
        assert await ledger.begin(theirs, "elsewhere/1-0", 10_000) == "begun"
        assert await ledger.begin(ours, "here/2-0", 10_000) == "begun"
        why = await sole_owner(context(ledger, ours, "here/2-0"))
        assert why is not None and "elsewhere/1-0" in why
        # The bench's executor is then built without take_back: its prepare ends nothing.
        assert await LocalExecutor(run_id, BundleStore(tmp_path), take_back=False).prepare() == []
        assert alive(engine), "work of a run that another live instance holds is never ended"
    finally:
        kill_group(os.getpgid(engine), grace_s=1)


def test_stopping_services_ends_the_servers_of_one_that_had_to_be_killed(tmp_path):
    """`specdec up` and `make demo` stop their services with SIGTERM; one still running after the grace
    period is SIGKILLed, and the servers it had started (their whole groups) are ended with it."""
    service = subprocess.Popen(
        [sys.executable, "-c", "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
         + RUNNER.format(root=str(ROOT), server=SERVER), f"tb-{os.getpid()}-c"],
        stdout=subprocess.PIPE, text=True)
    server, engine = (int(pid) for pid in service.stdout.readline().split())
    ended = stop({"bench-runner": service}, grace_s=1.0)
    assert ended == [server], ended
    assert service.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while alive(engine) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(engine) and not alive(server)
