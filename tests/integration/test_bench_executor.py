"""The local executor with stand-in servers (real processes, real HTTP)."""

from __future__ import annotations

import sys

import pytest

from services.bench.errors import ServerDied, ServerNotReady
from services.bench.executors.executor import launch, wait_ready
from services.runtime.processes.procs import labelled_processes

HEALTHY = [sys.executable, "-c", """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == '/health' else 404); self.end_headers()
    def log_message(self, *a): pass
print('serving', flush=True)
http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
""", "{port}"]
DYING = [sys.executable, "-c", "import sys; print('cannot load model: boom', flush=True); sys.exit(3)", "{port}"]
SILENT = [sys.executable, "-c", "import time; print('loading...', flush=True); time.sleep(60)", "{port}"]


async def test_ready_server_is_labelled_and_stopped_by_group(tmp_path):
    server = launch(HEALTHY, run_id="toy-exec-run", log_path=tmp_path / "server.log")
    try:
        assert await wait_ready(server, timeout_s=20) >= 0
        assert server.argv[-1] == str(server.port)
        assert any(p.pid == server.process.pid and p.run_id == "toy-exec-run"
                   for p in labelled_processes("bench-runner"))
    finally:
        server.stop(grace_s=2)
    assert not server.alive()
    assert "serving" in (tmp_path / "server.log").read_text()


async def test_server_that_dies_at_start_reports_its_log(tmp_path):
    server = launch(DYING, run_id="toy-exec-run", log_path=tmp_path / "server.log")
    with pytest.raises(ServerDied, match="boom"):
        await wait_ready(server, timeout_s=20)
    server.stop(grace_s=1)


async def test_server_that_never_answers_times_out_with_its_log(tmp_path):
    server = launch(SILENT, run_id="toy-exec-run", log_path=tmp_path / "server.log")
    try:
        with pytest.raises(ServerNotReady, match="loading"):
            await wait_ready(server, timeout_s=1.5, poll_s=0.2)
    finally:
        server.stop(grace_s=1)


PRINT_ENV = [sys.executable, "-c", """
import os
for name in ('VLLM_CPU_KVCACHE_SPACE', 'VLLM_ENABLE_V1_MULTIPROCESSING'):
    print(name, os.environ.get(name), flush=True)
""", "{port}"]


def test_the_engine_defaults_follow_the_vllm_build():
    from services.bench.executors.executor import engine_env_defaults

    assert engine_env_defaults(cpu_build=True) == {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    assert engine_env_defaults(cpu_build=False) == {"VLLM_CPU_KVCACHE_SPACE": "1"}


def test_a_server_gets_specdecs_engine_defaults_the_operators_environment_wins_and_the_record_says_which(tmp_path):
    import os

    from services.bench.executors.executor import LocalServed, _cpu_build

    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    server = launch(PRINT_ENV, run_id="toy-exec-run", log_path=tmp_path / "a.log", env=env)
    server.process.wait(timeout=20)
    mp_default = "0" if _cpu_build() else "None"
    assert f"VLLM_ENABLE_V1_MULTIPROCESSING {mp_default}" in (tmp_path / "a.log").read_text()
    assert "VLLM_CPU_KVCACHE_SPACE 1" in (tmp_path / "a.log").read_text()
    assert LocalServed(server, "bench/x/launch-0").record()["env"] == server.env
    assert server.env.get("VLLM_CPU_KVCACHE_SPACE") == "1"

    own = {**env, "VLLM_ENABLE_V1_MULTIPROCESSING": "1", "VLLM_CPU_KVCACHE_SPACE": "4"}
    theirs = launch(PRINT_ENV, run_id="toy-exec-run", log_path=tmp_path / "b.log", env=own)
    theirs.process.wait(timeout=20)
    text = (tmp_path / "b.log").read_text()
    assert "VLLM_ENABLE_V1_MULTIPROCESSING 1" in text and "VLLM_CPU_KVCACHE_SPACE 4" in text
    assert theirs.env == {}  # specdec set nothing: the operator's values ran
