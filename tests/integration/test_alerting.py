"""Stalled runs are visible to operators: the alert rules, the dashboard, and the metrics they read.

- promtool checks infra/prometheus/alerts.yml and runs its unit tests (one firing and one silent
  case per alert, infra/prometheus/alerts.test.yml); `make test` installs promtool first
  (infra/bin/ensure-promtool).
- Every metric the rules and the Grafana dashboard name is served by a live service's /metrics.
- The age of the oldest waiting step counts entries not yet delivered and pending entries nobody
  heartbeats, never a running step.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import redis.asyncio as aioredis
import yaml

from services.runtime.delivery.consumer import Route, StepContext
from services.runtime.delivery.service import bootstrap
from services.runtime.settings import RuntimeSettings
from tests.integration.test_health import endpoint, eventually, requested, sample

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "infra/prometheus/alerts.yml"
RULE_TESTS = ROOT / "infra/prometheus/alerts.test.yml"
DASHBOARD = ROOT / "infra/grafana/specdec-dashboard.json"
SERVICE = "probe"
SCHEMA = "profile.requested"
METRIC = re.compile(r"\bspecdec_[a-z0-9_]+")
AGE = "specdec_oldest_waiting_step_age_seconds"


def promtool() -> str:
    found = shutil.which("promtool") or (Path("/usr/bin/promtool").is_file() and "/usr/bin/promtool")
    if not found:
        pytest.fail("promtool is missing: run infra/bin/ensure-promtool (`make test` does), or install Debian's "
                    "prometheus package")
    return str(found)


def test_promtool_checks_the_rules_and_runs_their_unit_tests() -> None:
    for argv in (["check", "rules", str(RULES)], ["test", "rules", str(RULE_TESTS)]):
        done = subprocess.run([promtool(), *argv], capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, f"promtool {' '.join(argv)}:\n{done.stdout}\n{done.stderr}"
    # One firing and one silent case per alert.
    alerts = [rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    cases: dict[str, list[bool]] = {alert: [] for alert in alerts}
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case["alert_rule_test"]:
            cases[check["alertname"]].append(bool(check["exp_alerts"]))
    assert {alert: sorted(kinds) for alert, kinds in cases.items()} == {alert: [False, True] for alert in alerts}


def named_metrics() -> set[str]:
    """Every specdec_* metric the alert rules and the dashboard query."""
    rules = [rule["expr"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    panels = json.loads(DASHBOARD.read_text())["panels"]
    exprs = rules + [target["expr"] for panel in panels for target in panel["targets"]]
    return {name for expr in exprs for name in METRIC.findall(expr)}


async def test_every_metric_the_rules_and_the_dashboard_name_is_served(settings: RuntimeSettings) -> None:
    async def handler(event, ctx: StepContext):
        return []

    service = bootstrap(SERVICE, [Route(SCHEMA, handler)], settings=settings)
    stream = service.bus.stream_of(SCHEMA)
    async with endpoint(service) as http:
        try:
            await service.start()
            # One step handled and one dead letter: every labelled series has a sample.
            await service.bus.publish(requested("ok-run-1"))
            await service.bus.publish_raw(stream, b"{not json", {"schema": SCHEMA}, "garbage-1")

            async def settled() -> str | None:
                text = (await http.get("/metrics")).text
                return text if sample(text, "specdec_events_dead_lettered_total", schema=SCHEMA) == 1 else None

            text = str(await eventually(settled, "the step and the dead letter"))
        finally:
            await service.stop(grace_s=1.0)
    served = {name for name in METRIC.findall(text)}
    wanted = named_metrics()
    assert {"specdec_oldest_waiting_step_age_seconds", "specdec_deadletter_entries", "specdec_redis_up",
            "specdec_group_lag"} <= wanted
    assert wanted - served == set(), f"named by the rules or the dashboard, not served: {sorted(wanted - served)}"
    assert sample(text, "specdec_deadletter_entries", service=SERVICE) == 1
    assert sample(text, AGE, service=SERVICE, stream=stream) == 0, "nothing waits once both entries are handled"


async def test_the_oldest_waiting_step_is_undelivered_or_abandoned_never_running(settings: RuntimeSettings) -> None:
    release = asyncio.Event()

    async def handler(event, ctx: StepContext):
        await release.wait()
        return []

    service = bootstrap(SERVICE, [Route(SCHEMA, handler)], settings=settings)
    stream = service.bus.stream_of(SCHEMA)
    raw = aioredis.Redis.from_url(settings.redis_url)
    async with endpoint(service) as http:

        async def age() -> float | None:
            return sample((await http.get("/metrics")).text, AGE, service=SERVICE, stream=stream)

        try:
            await service.broker.connect()
            await service.prepare()
            assert await age() == 0
            # An instance that died holding an entry (read, never acked, never touched again)...
            await service.bus.publish(requested("abandoned-run"))
            await raw.xreadgroup(SERVICE, "dead-instance", {stream: ">"}, count=1)
            await asyncio.sleep(0.3)
            # ...and an entry not delivered yet.
            await service.bus.publish(requested("undelivered-run"))
            await asyncio.sleep(0.3)
            first = await age()
            assert first is not None and 0.25 <= first < 0.6, "the undelivered entry counts at once"
            # Past the reclaim idle time nobody touched the first one: it counts too, and it is older.
            await asyncio.sleep(settings.reclaim_idle_ms / 1000)
            later = await age()
            assert later is not None and later >= settings.reclaim_idle_ms / 1000 + 0.5

            # Started, the instance reclaims and runs both: running steps are heartbeated, not waiting.
            await service.start()

            async def running() -> bool:
                return (await http.get("/health")).json()["streams"][0]["lag"] == 0 and await age() == 0

            await eventually(running, "both steps taken up")
        finally:
            release.set()
            await service.stop(grace_s=1.0)
            await raw.aclose()
