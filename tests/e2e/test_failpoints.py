"""Every failpoint crashed in a whole campaign (services/runtime/failpoints.py, docs/delivery.md).

For each failpoint in the registry a campaign runs with that point armed (`SPECDEC_FAILPOINTS`)
on one service, which SIGKILLs itself there. The test supervises the topology as a container's
restart policy would: a service that died of its failpoint is started again, disarmed, under the
same consumer name. Then:
- the run completes, each step's event once, no trial measured or counted twice;
- the bundle's journal holds every event of the run once;
- the report is final (not a DRAFT): no data was really lost;
- nothing is dead-lettered;
- every armed point fired (its process died by SIGKILL and said which point).

Points in different services cannot interact, so one campaign carries several (one per
service); every service is served by the stand-in server (the engine is not under test here).
A registered failpoint that no campaign arms fails the suite.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts import layout
from services.runtime import apps, failpoints
from tests.e2e.test_reliability import RUN_TIMEOUT_S, TRAFFIC, assert_completed_once, assert_journal_complete
from tests.support.campaigns import (
    ROOT,
    Topology,
    counter_lines,
    counter_of,
    dead_letters,
    leftovers,
    running_topology,
    write_campaign,
    write_trainer,
)

# One campaign per entry: process -> the point armed in it (and the pass it fires on). "submit" is
# `specdec submit` itself; the others are services. One point per process: points in different
# processes cannot interact, so one campaign carries them all while each has a process of its own
# (a campaign costs about a minute of `make test`).
SUBMIT = "submit"
TRAINER_SLEEP_S = 8.0
CAMPAIGNS: list[dict[str, str]] = [
    {
        # The capacity step's first artifact: its file is published, its record not; the retry adopts it.
        "capacity": "bundle.file-before-record=kill",
        # The journal's first append is torn in half; the next append keeps the half aside.
        "journal": "journal.torn-append=kill",
        # The second trial's result is recorded, its event is not; the retry emits it, same ID.
        "bench-runner": "bench.result-before-event=kill@2",
        # gate.decided is published, the trigger not acked; the retry re-emits the recorded decision.
        "gate": "delivery.published-before-ack=kill",
        # campaign.submitted is recorded in the bundle and never published: the journal's repair pass
        # publishes it, and the run starts without anyone running `specdec resume`.
        SUBMIT: "outbox.recorded-before-publish=kill",
        # The trainer runs on with no proxy; the restarted proxy re-attaches or reads its end.
        "trainer-proxy": "trainer.proxy-during-training=kill",
        # The corpus step's lease is taken, the step not started; the lease lapses and it runs once.
        "corpus": "delivery.leased-before-step=kill",
    },
]


def _armed_name(setting: str) -> str:
    return setting.partition("=")[0]


def test_every_failpoint_is_crashed_by_a_campaign() -> None:
    armed = [_armed_name(setting) for campaign in CAMPAIGNS for setting in campaign.values()]
    assert sorted(armed) == sorted(set(armed)), "a failpoint is armed in two campaigns"
    assert set(armed) == set(failpoints.BY_NAME), (
        f"failpoints without a crash test: {sorted(set(failpoints.BY_NAME) - set(armed))}"
    )
    for campaign in CAMPAIGNS:
        assert failpoints.parse(",".join(campaign.values()))  # each setting is one a service accepts


@pytest.fixture
def topology(redis_url: str, tmp_path: Path) -> Iterator[Topology]:
    yield from running_topology(redis_url, tmp_path, "fp")


def _submit_killed(topology: Topology, campaign: Path, setting: str) -> str:
    """`specdec submit` killed at its failpoint: the run it stored (its ID was never printed)."""
    before = set(topology.bundle_root.iterdir()) if topology.bundle_root.is_dir() else set()
    proc = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "submit", str(campaign)],
        env={**topology.env, failpoints.ENV: setting}, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr)
    assert f"failpoint {_armed_name(setting)} fired" in proc.stderr, proc.stderr
    runs = sorted(set(topology.bundle_root.iterdir()) - before)
    assert len(runs) == 1, runs
    return runs[0].name


def _supervise(
    topology: Topology, run_id: str, armed: dict[str, str], orphans: dict[str, list[Any]]
) -> tuple[list[dict], set[str]]:
    """Until the run's report is published: restart, disarmed, each service its failpoint killed,
    noting in `orphans` the run's labelled processes that outlived it (before its restart).
    Returns the run's events and the names of the points that fired."""
    fired: set[str] = set()
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        for name, proc in list(topology.procs.items()):
            code = proc.poll()
            if code is None:
                continue
            log = (topology.logs / f"{name}.{topology.starts[name]}.log").read_text(errors="replace")
            point = _armed_name(armed.get(name, ""))
            if code != -signal.SIGKILL or name not in armed or f"failpoint {point} fired" not in log:
                raise AssertionError(f"service {name} exited with {code} not at its failpoint:\n{topology.log_tail()}")
            fired.add(point)
            del armed[name]
            orphans[name] = leftovers(run_id)
            topology.start(name)
        events = topology.events(run_id)
        schemas = {e["schema"] for e in events}
        if "report.published" in schemas:
            return topology.settle(run_id), fired
        if any(s.endswith(".failed") for s in schemas) or "capacity.unavailable" in schemas:
            failed = [e for e in events if e["schema"].endswith(".failed") or e["schema"] == "capacity.unavailable"]
            raise AssertionError(f"run {run_id} halted: {failed}\n{topology.log_tail()}")
        time.sleep(0.3)
    raise AssertionError(f"run {run_id} did not publish within {RUN_TIMEOUT_S}s\n{topology.log_tail()}")


def _draft_reasons(topology: Topology, run_id: str) -> list[str]:
    summary = topology.bundle_root / run_id / layout.REPORT_SUMMARY
    return json.loads(summary.read_text()).get("draft_reasons", []) if summary.is_file() else ["no report.json"]


@pytest.mark.parametrize("campaign", CAMPAIGNS, ids=lambda c: "+".join(_armed_name(v) for v in c.values()))
def test_a_campaign_crashed_at_its_failpoints_completes_once(
    campaign: dict[str, str], topology: Topology, toy_target: Path, tmp_path: Path
) -> None:
    armed = dict(campaign)
    topology_names = set(apps.available())
    assert set(armed) - {SUBMIT} <= topology_names, f"no such service: {sorted(set(armed) - topology_names)}"
    for name in sorted(topology_names):
        topology.start(name, {failpoints.ENV: armed[name]} if name in armed else None)
    trainer = write_trainer(tmp_path / "trainer")
    # The trainer outlasts its proxy's restart, so the restarted proxy re-attaches to a live trainer.
    path = write_campaign(tmp_path / "campaign.yaml", target=toy_target, traffic=TRAFFIC, trainer=trainer,
                          trainer_sleep_s=TRAINER_SLEEP_S)
    submitted: set[str] = set()
    if SUBMIT in armed:
        run_id = _submit_killed(topology, path, armed.pop(SUBMIT))
        submitted.add(_armed_name(campaign[SUBMIT]))
    else:
        run_id = topology.submit(path)

    orphans: dict[str, list[Any]] = {}
    events, fired = _supervise(topology, run_id, armed, orphans)
    fired |= submitted

    assert fired == {_armed_name(v) for v in campaign.values()}, f"armed but never reached: {sorted(armed.values())}"
    assert_completed_once(events)
    assert_journal_complete(topology, run_id, events)
    rendered = [e for e in events if e["schema"] == "report.rendered"]
    assert rendered and rendered[0]["draft"] is False, (
        f"the report is a DRAFT though nothing was lost: {_draft_reasons(topology, run_id)}\n{topology.log_tail()}"
    )
    assert dead_letters(topology, run_id) == []
    assert leftovers(run_id) == []
    if "trainer-proxy" in campaign:
        _assert_reattached(topology, run_id, trainer, orphans["trainer-proxy"])


def _assert_reattached(topology: Topology, run_id: str, trainer: Path, orphans: list[Any]) -> None:
    """The trainer ran on, labelled, when its proxy died, and ran once: the restarted proxy
    re-attached and captured its whole run (docs/trainer-proxy.md, "Redelivery")."""
    assert orphans, "the trainer died with its proxy"
    assert counter_lines(counter_of(trainer)) == ["start", "done"], "the trainer ran to completion exactly once"
    capture = json.loads((topology.bundle_root / run_id / "training/capture.json").read_text())
    assert capture["exit_code"] == 0 and not capture["interrupted"], capture
    assert capture["duration_s"] >= TRAINER_SLEEP_S, capture
