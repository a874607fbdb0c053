"""`make demo` rides out a 10 s Redis outage: its services and its follower retry, say so, and go on.

The demo's own parts, not the whole demo: services started as `specdec demo` and `specdec up`
start them (services/cli/up.py `start`: one process each, its log in a folder) and the demo's
follower (services/cli/demo.py `follow_run`), on a test-owned Redis that is killed and, 10 s
later, started again empty (the Redis `make demo` starts keeps nothing on disk). The run's
outcome is published after the outage: the follower, still following, ends with it; no service
exited; each service said once that Redis went and once that it answers again, with no
traceback; the journal took the outcome from the new streams.
"""

from __future__ import annotations

import asyncio
import io
import shutil
import threading
import time
import uuid
from pathlib import Path

import pytest

from contracts.events import ProfileFailed, ProfileRequested
from services.app.runs.progress import RunStatus
from services.cli import demo, up
from services.runtime.bundle.bundle import BundleStore
from services.runtime.settings import RuntimeSettings
from tests.support.publishing import publish_event
from tests.support.redis_server import RedisServer
from tests.support.waiting import wait_for

SERVICES = ["journal", "capacity"]  # neither reacts to the run's profile events: only the follower ends the run
OUTAGE_S = 10.0


def test_demo_services_and_follower_ride_out_a_10s_redis_outage(redis_server: RedisServer, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    prefix, root, logs = f"out{uuid.uuid4().hex[:8]}", tmp_path / "bundles", tmp_path / "logs"
    for name, value in {"REDIS_URL": redis_server.url, "STREAM_PREFIX": prefix, "BUNDLE_ROOT": str(root),
                        "RECLAIM_IDLE_MS": "3000"}.items():
        monkeypatch.setenv(f"SPECDEC_{name}", value)
    settings = RuntimeSettings()
    logs.mkdir()
    run = "outage-run-1"
    children = up.start(SERVICES, log_dir=str(logs))
    result: dict[str, RunStatus] = {}
    out = io.StringIO()
    follower = threading.Thread(
        target=lambda: result.setdefault("status", asyncio.run(demo.follow_run(settings, run, out, timeout_s=120))),
        daemon=True)
    try:
        for name in SERVICES:
            def started(log: Path = logs / f"{name}.log") -> bool:
                return '"service started"' in log.read_text()

            wait_for(started, 60, f"{name} to serve")
        follower.start()
        publish_event(redis_server.url, prefix, ProfileRequested(run_id=run, producer="cli/t", requested_by="t"))
        wait_for(lambda: "profile.requested" in out.getvalue(), 20, "the follower to show the first event")

        redis_server.kill()
        shutil.rmtree(redis_server.directory)
        time.sleep(OUTAGE_S)
        assert {n: c.poll() for n, c in children.items()} == dict.fromkeys(SERVICES), "a service exited in the outage"
        assert follower.is_alive(), "the follower ended in the outage"
        redis_server.start()

        failed = ProfileFailed(run_id=run, producer="profiler/t", step="profile",
                               reason="the outcome, after the outage", error_type="Test")
        publish_event(redis_server.url, prefix, failed)
        follower.join(timeout=30)
        assert not follower.is_alive(), f"the follower did not end with the run's outcome:\n{out.getvalue()}"
        status = result["status"]
        assert [(s.step, s.state) for s in status.steps][0] == ("profile", "failed")
        assert "profile.failed" in out.getvalue()

        notices = [line for line in capsys.readouterr().err.splitlines() if "Redis" in line]
        assert len(notices) == 2, notices
        assert "lost Redis while following events" in notices[0] and "retrying with backoff" in notices[0]
        assert notices[1].startswith("specdec: Redis answers again after ")

        bundle = BundleStore(root, fsync=False)
        wait_for(lambda: failed.event_id in {e["event_id"] for e in bundle.events(run)}, 20,
                 "the journal to take the outcome from the new streams")
        assert {n: c.poll() for n, c in children.items()} == dict.fromkeys(SERVICES), "a service exited"
        for name in SERVICES:
            text = (logs / f"{name}.log").read_text()
            assert "Traceback" not in text, f"{name}:\n{text[-3000:]}"
            assert text.count("lost Redis; every read retries with backoff") == 1, f"{name}:\n{text[-3000:]}"
            assert text.count("Redis answers again; reading on") == 1, f"{name}:\n{text[-3000:]}"
    finally:
        up.stop(children, grace_s=10)
