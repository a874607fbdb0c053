"""The local executor: a vLLM server as a labelled child process, ready or not.

The server runs in its own process group with the experiment label, on a free
loopback port, its output in a log file; it dies with the bench-runner
(parent-death signal) and is stopped by its group. Readiness polls /health
with a deadline; a server that exits or never answers raises with the tail
of its log in the message.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from services.runtime.errors import SpecdecError
from services.runtime.procs import kill_group, spawn

SERVICE = "bench-runner"
LOG_TAIL_BYTES = 4000


class ServingError(SpecdecError):
    """A server could not be started or did not become ready."""


class ServerDied(ServingError):
    """The server process exited before it was ready or during a measurement."""


class ServerNotReady(ServingError):
    """The server did not answer /health before its deadline."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return "(no server log)"
    return data[-limit:].decode("utf-8", "replace")


@dataclass
class Server:
    """A started server: its process, where it answers, and its log."""

    process: subprocess.Popen[bytes]
    port: int
    argv: list[str]
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace_s: float = 10.0) -> None:
        if self.process.poll() is None or _group_exists(self.process.pid):
            kill_group(self.process.pid, grace_s=grace_s)
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def launch(argv_template: list[str], *, run_id: str, log_path: Path, env: dict[str, str] | None = None) -> Server:
    """Start a server with `{port}` in its argv replaced by a free port."""
    port = free_port()
    argv = [token.replace("{port}", str(port)) for token in argv_template]
    child_env = dict(os.environ if env is None else env)
    # vLLM's CPU backend sizes its KV cache from this; 1 GiB serves the toy
    # models and leaves memory for the rest of the machine. An operator's
    # environment wins.
    child_env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("wb")
    try:
        process = spawn(argv, run_id=run_id, service=SERVICE, env=child_env, stdout=log, stderr=subprocess.STDOUT)
    finally:
        log.close()
    return Server(process=process, port=port, argv=argv, log_path=log_path)


async def wait_ready(server: Server, *, timeout_s: float, poll_s: float = 0.5) -> float:
    """Seconds until /health answered 200; raises with the log tail otherwise."""
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=2.0) as client:
        while True:
            if not server.alive():
                raise ServerDied(
                    f"server exited with {server.process.returncode} before it was ready; "
                    f"argv: {server.argv}\nlog tail:\n{log_tail(server.log_path)}"
                )
            try:
                response = await client.get(f"{server.base_url}/health")
                if response.status_code == 200:
                    return time.monotonic() - started
            except httpx.TransportError:
                pass
            if time.monotonic() - started > timeout_s:
                raise ServerNotReady(
                    f"server did not answer /health within {timeout_s:.0f}s; argv: {server.argv}\n"
                    f"log tail:\n{log_tail(server.log_path)}"
                )
            await asyncio.sleep(poll_s)
