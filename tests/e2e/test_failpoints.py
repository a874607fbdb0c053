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

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.runtime import apps, failpoints
from tests.e2e.test_reliability import RUN_TIMEOUT_S, TRAFFIC, assert_completed_once, assert_journal_complete
from tests.support.campaigns import Topology, dead_letters, drop_keys, leftovers, write_campaign, write_trainer

# One campaign per entry: service -> the point armed in it (and the pass it fires on).
CAMPAIGNS: list[dict[str, str]] = [
    {
        # The capacity step's snapshot: its file is published, its record not; the retry adopts it.
        "capacity": "bundle.file-before-record=kill",
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
    topo = Topology(redis_url=redis_url, prefix=f"fp{uuid.uuid4().hex[:8]}", root=tmp_path / "topology")
    yield topo
    topo.stop()
    drop_keys(redis_url, topo.prefix)


def _supervise(topology: Topology, run_id: str, armed: dict[str, str]) -> tuple[list[dict], set[str]]:
    """Until the run's report is published: restart, disarmed, each service its failpoint killed.
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


@pytest.mark.parametrize("campaign", CAMPAIGNS, ids=lambda c: "+".join(_armed_name(v) for v in c.values()))
def test_a_campaign_crashed_at_its_failpoints_completes_once(
    campaign: dict[str, str], topology: Topology, toy_target: Path, tmp_path: Path
) -> None:
    armed = dict(campaign)
    topology_names = set(apps.available())
    for name in sorted(topology_names):
        topology.start(name, {failpoints.ENV: armed[name]} if name in armed else None)
    assert set(armed) <= topology_names, f"no such service: {sorted(set(armed) - topology_names)}"
    trainer = write_trainer(tmp_path / "trainer")
    run_id = topology.submit(write_campaign(tmp_path / "campaign.yaml", target=toy_target, traffic=TRAFFIC, trainer=trainer))

    events, fired = _supervise(topology, run_id, armed)

    assert fired == {_armed_name(v) for v in campaign.values()}, f"armed but never reached: {sorted(armed.values())}"
    assert_completed_once(events)
    assert_journal_complete(topology, run_id, events)
    rendered = [e for e in events if e["schema"] == "report.rendered"]
    assert rendered and rendered[0]["draft"] is False, "the report is a DRAFT though nothing was lost"
    assert dead_letters(topology, run_id) == []
    assert leftovers(run_id) == []
