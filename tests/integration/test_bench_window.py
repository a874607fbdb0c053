"""The measurement process (services/bench/loadgen/window.py): one window driven from a
child process against the stand-in server, its record read back whole."""

from __future__ import annotations

import subprocess
import sys

import pytest

from services.bench.errors import WindowProcessFailed
from services.bench.executors.executor import launch, wait_ready
from services.bench.loadgen.loadgen import WindowSpec
from services.bench.loadgen.prompts import ChatTurn, Prompt
from services.bench.loadgen.window import run_window_process

RUN = "toy-window-run"
SERVER = [sys.executable, "-m", "tests.support.fake_vllm", "--port", "{port}",
          "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}']


def prompt(i: int) -> Prompt:
    text = f"prompt {i}"
    return Prompt(prompt_id=f"p{i}", messages=[ChatTurn(role="user", content=text)], text=text, input_tokens=3,
                  max_output_tokens=9, ignore_eos=True)


async def test_a_window_from_its_own_process_returns_every_request_and_the_scrapes(tmp_path):
    server = launch(SERVER, run_id=RUN, log_path=tmp_path / "server.log")
    try:
        await wait_ready(server, timeout_s=30)
        spec = WindowSpec(base_url=server.base_url, model="toy", max_concurrency=2, warmup_requests=1)
        window = await run_window_process(spec, [prompt(i) for i in range(5)], run_id=RUN)
    finally:
        server.stop()
    assert [r.prompt_id for r in window.requests] == [f"p{i}" for i in range(5)]
    assert all(r.ok for r in window.requests) and window.warmup_completed == 1
    assert window.summary().completed == 5
    assert "spec_decode_num_drafts" in (window.metrics_before or "") and window.metrics_after


async def test_a_window_that_cannot_run_says_why():
    spec = WindowSpec(base_url="http://127.0.0.1:9", model="toy")
    with pytest.raises(WindowProcessFailed, match="needs at least one prompt"):
        await run_window_process(spec, [], run_id=RUN)


def test_an_unreadable_request_exits_2_with_the_reason():
    proc = subprocess.run([sys.executable, "-m", "services.bench.loadgen.window"], input=b"not json",
                          capture_output=True, timeout=60)
    assert proc.returncode == 2 and b"unreadable request on stdin" in proc.stderr and proc.stdout == b""
