"""The local executor with stand-in servers (real processes, real HTTP)."""

from __future__ import annotations

import sys

import pytest

from services.bench.errors import ServerDied, ServerNotReady
from services.bench.executor import launch, wait_ready
from services.runtime.procs import labelled_processes

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
        assert any(p.pid == server.process.pid and p.run_id == "toy-exec-run" for p in labelled_processes("bench-runner"))
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
