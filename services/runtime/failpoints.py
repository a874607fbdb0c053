"""Named fault-injection points at the boundaries between two durable effects (`hit(NAME)`).

Each point is registered below with its place and process; unarmed, `hit` is one dictionary lookup.
Armed only through SPECDEC_FAILPOINTS, read once (first `hit` or `check_setting()` at start, which
refuses a misspelt entry); docs/delivery.md#crashes-one-table has the points and what each crash leaves.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from services.runtime.errors import ConfigurationError

ENV = "SPECDEC_FAILPOINTS"


class FailpointError(ConfigurationError):
    """SPECDEC_FAILPOINTS names an unknown failpoint or action."""


@dataclass(frozen=True)
class Failpoint:
    name: str
    process: str
    place: str
    leaves: str


REGISTRY: tuple[Failpoint, ...] = (
    Failpoint(
        "bundle.file-before-record", "any process writing an artifact",
        "services/runtime/bundle/bundle.py BundleStore.write_bytes",
        "an artifact's file published whole, without its index record",
    ),
    Failpoint(
        "journal.torn-append", "the journal",
        "services/runtime/bundle/bundle_events.py EventLog.append",
        "half an event's line at the end of events.jsonl (a torn write), the event unacked",
    ),
    Failpoint(
        "outbox.recorded-before-publish", "specdec submit, the bench-runner",
        "services/runtime/bundle/outbox.py record_emitted",
        "campaign.submitted or bench.trial.completed recorded in the bundle and never published",
    ),
    Failpoint(
        "delivery.leased-before-step", "any service",
        "services/runtime/delivery/consumer.py Consumer._handle",
        "a step's lease taken and its delivery counted, the step not started",
    ),
    Failpoint(
        "delivery.published-before-ack", "any service",
        "services/runtime/delivery/consumer.py Consumer._handle",
        "a step's outputs recorded and published, its done mark and ack not written",
    ),
    Failpoint(
        "bench.result-before-event", "the bench-runner",
        "services/bench/trial.py TrialSteps.record",
        "a trial's result recorded, its bench.trial.completed neither recorded nor published",
    ),
    Failpoint(
        "trainer.proxy-during-training", "the trainer-proxy",
        "services/trainer_proxy/execution/execute.py _launch",
        "a trainer running (training.started published) with no proxy watching it",
    ),
)
"""Every failpoint. tests/unit/runtime/test_failpoint_registry.py checks each is hit somewhere in services/ and
tests/e2e/test_failpoints.py crashes a campaign at each; a failpoint without a crash test fails it."""

BY_NAME: Mapping[str, Failpoint] = {point.name: point for point in REGISTRY}


@dataclass
class _Armed:
    fire_at: int
    passes: int = 0
    fired: bool = False


_lock = threading.Lock()
_armed: dict[str, _Armed] | None = None


def parse(value: str) -> dict[str, int]:
    """`NAME=kill[@N],...` -> {name: the pass that fires}; FailpointError names what is wrong (pure)."""
    points: dict[str, int] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        name, sep, action = item.partition("=")
        name, action = name.strip(), action.strip()
        if not sep:
            raise FailpointError(f"{ENV} entry {item!r} has no action: write NAME=kill or NAME=kill@N")
        if name not in BY_NAME:
            raise FailpointError(
                f"{ENV} names unknown failpoint {name!r}; known: {', '.join(sorted(BY_NAME))}"
            )
        kind, at, count = action.partition("@")
        if kind != "kill" or (at and not (count.isdigit() and int(count) >= 1)):
            raise FailpointError(
                f"{ENV} action {action!r} for {name} is not one specdec runs: write kill or kill@N with N >= 1"
            )
        if name in points:
            raise FailpointError(f"{ENV} arms {name} twice: keep one entry")
        points[name] = int(count) if at else 1
    return points


def check_setting(environ: Mapping[str, str] | None = None) -> list[str]:
    """Parse the setting now (a service's start): the armed names; FailpointError when it is wrong."""
    environ = os.environ if environ is None else environ
    return sorted(parse(environ.get(ENV, "")))


def _load() -> dict[str, _Armed]:
    global _armed
    with _lock:
        if _armed is None:
            _armed = {name: _Armed(at) for name, at in parse(os.environ.get(ENV, "")).items()}
        return _armed


def hit(name: str, before: Callable[[], object] | None = None) -> None:
    """Pass failpoint `name`: SIGKILL this process when the setting arms it for this pass, after
    `before()` (the part of the effect a crash there leaves done, e.g. half a journal line)."""
    armed = _armed if _armed is not None else _load()
    if not armed:
        return
    point = armed.get(name)
    if point is None:
        if name not in BY_NAME:
            raise FailpointError(f"failpoint {name!r} is not in the registry (services/runtime/failpoints.py)")
        return
    with _lock:
        point.passes += 1
        fire = not point.fired and point.passes == point.fire_at
        point.fired = point.fired or fire
    if fire:
        # One line on stderr, then no cleanup at all: this is the crash the point stands for.
        if before is not None:
            before()
        os.write(sys.stderr.fileno(), f"failpoint {name} fired on pass {point.passes}: SIGKILL\n".encode())
        os.kill(os.getpid(), signal.SIGKILL)


def reset_for_tests() -> None:
    """Forget the parsed setting, so a test can arm points through the environment again."""
    global _armed
    with _lock:
        _armed = None
