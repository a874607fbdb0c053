"""The measurement process keeps off a local engine's core and reports its own CPU use
(services/bench/loadgen/window.py): which CPUs it pins to, the pin as a child really gets it, and
the record it writes."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from typing import Any

import orjson
import pytest

from services.bench.loadgen import window as window_module
from services.bench.loadgen.loadgen import WindowRecord, WindowSpec
from services.bench.loadgen.window import MeasuredWindow, loadgen_cpus, request_bytes
from tests.unit.bench.test_run_interleaved import PROMPTS


@pytest.mark.parametrize(("base_url", "allowed", "pinned"), [
    ("http://127.0.0.1:8000", {0, 1}, [1]),
    ("http://localhost:8000", {0, 1, 2, 3}, [1, 2, 3]),
    ("http://[::1]:8000", {0, 5}, [5]),
    ("http://gpu-7.cluster:41234", {0, 1}, None),  # a Slurm node: the engine is not on this host
    ("http://127.0.0.1:8000", {0}, None),  # one CPU: nowhere else to go
    ("http://127.0.0.1:8000", {2, 3}, None),  # already kept off core 0
])
def test_the_window_keeps_off_the_engines_core_only_when_the_engine_is_here(base_url, allowed, pinned) -> None:
    assert loadgen_cpus(base_url, allowed) == pinned


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2
                    or 0 not in os.sched_getaffinity(0), reason="needs Linux with CPU 0 and another CPU allowed")
def test_a_measurement_process_really_runs_off_core_0() -> None:
    code = ("import os; from services.bench.loadgen.window import _pin; "
            "print(_pin('http://127.0.0.1:1'), sorted(os.sched_getaffinity(0)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    expected = sorted(os.sched_getaffinity(0) - {0})
    assert out.strip() == f"{expected} {expected}"


def test_the_record_carries_the_processes_cpu_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = WindowSpec(base_url="http://127.0.0.1:9", model="toy", max_concurrency=1)

    async def drive_window(given: WindowSpec, prompts: Any) -> WindowRecord:
        assert given == spec
        sum(i * i for i in range(200_000))  # some CPU of its own
        return WindowRecord(spec=spec, duration_s=0.1, requests=[], warmup_completed=0, warmup_failed=0,
                            max_in_flight=0, metrics_before=None, metrics_after=None, metrics_error="none")

    stdout = io.BytesIO()
    monkeypatch.setattr(window_module, "drive_window", drive_window)
    monkeypatch.setattr(window_module, "_pin", lambda base_url: [1])  # never pin the test's own process
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(request_bytes(spec, PROMPTS))))
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(stdout))
    assert window_module.main() == 0
    sys.stdout.flush()
    measured = MeasuredWindow.model_validate(orjson.loads(stdout.getvalue()))
    usage = measured.loadgen_cpu
    assert usage is not None and usage.cpus == [1]
    assert usage.user_s + usage.sys_s > 0 and usage.wall_s > 0
    assert measured.metrics_error == "none" and measured.spec == spec
