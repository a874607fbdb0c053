"""Stopping cleans up by label, with real processes; `specdec status` names what a stop left and
`specdec cleanup RUN_ID` ends it, by label only and only when acknowledged.

The shape that leaked: a service's server starts a helper of its own that ignores SIGTERM
(multiprocessing's resource tracker does) and is re-parented when the server dies; it still
carries the run's label, and the next campaign's capacity step found the node busy.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cli.main import main
from services.cli.up import stop
from services.runtime.processes.procs import DEPLOYMENT_ENV, deployment_id, end_labelled, labelled_processes
from services.runtime.settings import RuntimeSettings
from tests.support.cli_runs import restore_logging  # noqa: F401 (autouse fixture)
from tests.support.waiting import alive, wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "infra/examples/campaign.yaml"
ACK = "--i-understand-this-kills-processes"

# A server that starts a tracker of its own, which ignores SIGTERM and outlives it; prints the tracker's pid.
SERVER = textwrap.dedent("""
    import subprocess, sys, time
    tracker = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"])
    print(tracker.pid, flush=True)
    time.sleep(120)
""")

# A service stand-in: spawns the server through specdec's spawn (labelled) and prints the tracker's pid.
# On SIGTERM it ends its server's main process only and exits, as a step cancelled mid-bench may.
SERVICE = textwrap.dedent("""
    import signal, subprocess, sys, time
    sys.path.insert(0, {root!r})
    from services.runtime.processes import procs
    server = procs.spawn([sys.executable, "-c", {server!r}], run_id=sys.argv[1], service="bench-runner",
                         stdout=subprocess.PIPE)

    def on_term(signum, frame):
        server.terminate()
        server.wait()
        if sys.argv[2:] == ["sweep"]:
            procs.end_started(grace_s=1.0)
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)  # before the pid goes out: the test may stop it at once
    print(server.stdout.readline().decode().strip(), flush=True)
    time.sleep(120)
""")


@pytest.fixture
def run_id() -> Iterator[str]:
    run = f"stop-{uuid.uuid4().hex[:8]}"
    yield run
    end_labelled(run, grace_s=0.5)


def service(run_id: str, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """The service stand-in and its server's tracker pid."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVICE.format(root=str(ROOT), server=SERVER), run_id, *args],
        stdout=subprocess.PIPE, env=env,
    )
    assert proc.stdout is not None
    tracker = int(proc.stdout.readline().decode().strip())
    # A process just exec'd shows an empty environment in /proc for a moment: wait for its label.
    wait_for(lambda: tracker in [p.pid for p in labelled_processes() if p.run_id == run_id], 10, "the tracker's label")
    return proc, tracker


def labelled(run_id: str) -> list[int]:
    return [p.pid for p in labelled_processes() if p.run_id == run_id]


def test_stopping_up_ends_every_process_labelled_with_its_services_runs(run_id: str) -> None:
    child, tracker = service(run_id)
    assert alive(tracker) and tracker in labelled(run_id)

    stop({"bench-runner": child}, grace_s=10)

    wait_for(lambda: not alive(tracker), 10, "the tracker to be ended")
    assert labelled(run_id) == []


def test_a_stopping_service_ends_what_it_started_by_label(run_id: str) -> None:
    child, tracker = service(run_id, "sweep")
    child.send_signal(signal.SIGTERM)
    child.wait(timeout=20)

    assert not alive(tracker), "the stopped service left its server's tracker running"
    assert labelled(run_id) == []


# --- status and cleanup ------------------------------------------------------------------


@pytest.fixture
def env(settings: RuntimeSettings, monkeypatch: pytest.MonkeyPatch) -> RuntimeSettings:
    for name, value in settings.model_dump().items():
        monkeypatch.setenv(f"SPECDEC_{name.upper()}", str(value))
    return settings


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def orphan(settings: RuntimeSettings, run_id: str) -> int:
    """A tracker labelled with the run and this deployment whose service is gone (SIGKILLed)."""
    import os

    deployment = deployment_id(settings.redis_url, settings.stream_prefix)
    child, tracker = service(run_id, env={**os.environ, DEPLOYMENT_ENV: deployment})
    child.send_signal(signal.SIGKILL)
    child.wait()
    wait_for(lambda: [p for p in labelled_processes() if p.run_id == run_id] == [
        p for p in labelled_processes() if p.pid == tracker], 10, "the server to die with its service")
    return tracker


def test_status_names_a_labelled_process_whose_run_has_no_live_service(env, capsys) -> None:
    code, out, err = cli(capsys, "submit", str(EXAMPLE))
    assert code == 0, err
    run_id = out.strip().splitlines()[-1]
    try:
        tracker = orphan(env, run_id)

        code, out, _ = cli(capsys, "status", run_id)

        assert f"pid {tracker}" in out and f"specdec cleanup {run_id}" in out, out
    finally:
        end_labelled(run_id, grace_s=0.5)


def test_cleanup_is_a_dry_run_until_acknowledged_then_ends_by_label(env, capsys, run_id) -> None:
    tracker = orphan(env, run_id)

    code, out, _ = cli(capsys, "cleanup", run_id)
    assert code == 0 and f"pid {tracker}" in out and ACK in out, out
    assert alive(tracker), "a dry run ended a process"

    code, out, _ = cli(capsys, "cleanup", run_id, ACK)
    assert code == 0 and "ended" in out, out
    assert not alive(tracker) and labelled(run_id) == []


def test_cleanup_refuses_a_run_a_live_service_holds(env, capsys, run_id) -> None:
    import redis

    tracker = orphan(env, run_id)
    client = redis.Redis.from_url(env.redis_url)
    lease = f"{env.stream_prefix}:ledger:inflight:bench-runner:{run_id}:bench.planned:bench"
    client.set(lease, "someone", px=30_000)
    try:
        code, _, err = cli(capsys, "cleanup", run_id, ACK)
    finally:
        client.delete(lease)
        client.close()
    assert code == 2 and "live" in err, err
    assert alive(tracker)

