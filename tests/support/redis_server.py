"""A test-owned redis-server process: started, SIGKILLed and restarted on demand."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis

CREDENTIALS = Path(__file__).resolve().parents[2] / "infra/bin/redis-credentials"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    def __init__(self, directory: Path, *, appendfsync: str = "always", config: Path | None = None) -> None:
        """AOF on with `appendfsync`; or, given `config` (compose's infra/redis.conf), that file's
        settings as they are, only its port, bind address, folder and ACL file replaced by the test's.

        Either way with specdec's ACL users, as infra/bin/ensure-redis starts one: the default user
        off, the services' and the operator's users from infra/bin/redis-credentials, generated
        once beside `directory` (so they outlive a restart that wipes it)."""
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not installed; `make test` installs it (infra/bin/ensure-redis)")
        self.directory = directory
        self.appendfsync = appendfsync
        self.config = config
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.users = directory.with_name(f"{directory.name}-users")
        subprocess.run([str(CREDENTIALS), str(self.users), "127.0.0.1", str(self.port)], check=True)

    @property
    def url(self) -> str:
        """The services' URL (their ACL user: everything but writing the approval stream)."""
        return self.services_url

    @property
    def services_url(self) -> str:
        """The URL the services connect with."""
        return (self.users / "services.url").read_text().strip()

    @property
    def operator_url(self) -> str:
        """The URL an operator approves with (the operator's ACL user; FLUSHALL too, but no admin command)."""
        return (self.users / "operator.url").read_text().strip()

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(  # fixed argv
            [
                "redis-server", *([str(self.config)] if self.config else []), "--port", str(self.port),
                "--bind", "127.0.0.1", "--protected-mode", "yes", "--aclfile", str(self.users / "users.acl"),
                "--dir", str(self.directory), "--logfile", str(self.directory / "redis.log"),
                *([] if self.config else ["--save", "", "--appendonly", "yes", "--appendfsync", self.appendfsync]),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                # Answering PING is not enough after a restart: wait until the AOF is loaded.
                if client.ping() and client.info("persistence").get("loading") == 0:
                    client.close()
                    return
            except redis.exceptions.BusyLoadingError:
                pass
            except redis.ConnectionError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"test redis-server on {self.port} did not start; see {self.directory / 'redis.log'}")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final fsync beyond what appendfsync did."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
            self.process = None
