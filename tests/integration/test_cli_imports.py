"""The commands that only read the streams load only what reading needs. Goal: each command within 0.5 s.

`specdec status`, `watch` and `dlq list` run whole, in a fresh interpreter, on a
real Redis holding one event that faststream wrote as a service writes it: none
may load faststream (entries are read by services.runtime.delivery.wire), structlog (they
never log through it), the event models or the campaign schema under them, nor
the OpenTelemetry metrics SDK (redis-py's optional metrics, off in specdec). Each
of those costs ~0.2-0.9 s of CPU on the development machines, against a budget
of 0.5 s a command (tests/perf/bench_cli.py times them). The output is checked
too: a command that skipped its work would pass the import check for nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from contracts.events import ProfileRequested
from tests.support.publishing import publish_event

ROOT = Path(__file__).resolve().parents[2]
RUN = "lazy-imports-run"
PROBE = """
import contextlib, io, json, sys
from services.cli.main import main
outputs = []
for argv in (["status", "lazy-imports-run"], ["watch", "--from-start", "--timeout", "0"], ["dlq", "list", "--json"]):
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(argv)
    outputs.append({"argv": argv, "code": code, "out": out.getvalue(), "err": err.getvalue()})
print(json.dumps({"outputs": outputs, "modules": sorted(name for name, module in sys.modules.items() if module)}))
"""


def publish_one(redis_url: str, prefix: str) -> None:
    publish_event(redis_url, prefix, ProfileRequested(run_id=RUN, producer="test", requested_by="test"))


def test_reading_commands_load_neither_the_broker_nor_the_event_models_nor_structlog(redis_url: str, prefix: str):
    publish_one(redis_url, prefix)
    env = {**os.environ, "SPECDEC_REDIS_URL": redis_url, "SPECDEC_STREAM_PREFIX": prefix}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    status, watch, dlq = found["outputs"]
    assert status["code"] == 0 and "profile" in status["out"] and RUN in status["out"], status
    assert watch["code"] == 0 and "profile.requested" in watch["out"] and RUN in watch["out"], watch
    assert dlq["code"] == 0 and json.loads(dlq["out"]) == [], dlq
    modules = set(found["modules"])
    assert "redis.asyncio" in modules and "services.runtime.delivery.wire" in modules  # the probe did read Redis
    packages = {name.split(".")[0] for name in modules}
    assert packages & {"faststream", "structlog", "scipy", "numpy", "httpx"} == set()
    heavy = {"contracts.events", "contracts.campaign", "contracts.catalogue", "services.runtime.delivery.broker"}
    assert modules & heavy == set()
    # redis-py's optional metrics, which would load the OpenTelemetry SDK vLLM installs (services/cli/main.py).
    assert not [name for name in modules if name.startswith("opentelemetry.sdk")]
