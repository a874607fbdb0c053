"""Whole campaigns on a topology of this test's own, for the reliability e2e tests.

- `Topology`: every built service as its own process (`python -m
  services.runtime.main NAME`) against a Redis and a stream prefix of the
  test, each restartable and SIGKILLable on its own; its logs in a folder.
- `write_campaign`: the demo campaign (infra/examples/toy-campaign.yaml)
  rewritten for a fast run: the toy target, a tiny trainer script, and cells
  served by the stand-in server (tests/support/fake_vllm.py) through the
  cell's operator serve command.
- `TRAINER`: the tiny trainer: it counts its starts and completions in a file
  outside the bundle, optionally sleeps or exits non-zero, and "trains" by
  copying the target checkpoint into `{output_dir}` (a real checkpoint the
  trainer-proxy's probes load; its vocabulary is the target's by construction).
- Readers: a run's events from the streams, waiting for a run to reach an
  event or halt, the CLI (`specdec submit`, `specdec status --json`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import redis
import yaml

from contracts.catalogue import CATALOGUE
from services.runtime import apps
from services.runtime.delivery.broker import decode_entry
from services.runtime.processes.procs import labelled_processes
from tests.support.stream_entries import entries

ROOT = Path(__file__).resolve().parents[2]

# Delivery settings that make a crashed instance's work come back within
# seconds: a message idle for 3 s is reclaimed (the owner's heartbeat resets
# it every second; the in-flight lease lasts 2 s), reclaim polls every 0.3 s.
FAST_DELIVERY = {
    "SPECDEC_RECLAIM_IDLE_MS": "3000",
    "SPECDEC_RECLAIM_POLL_MS": "300",
    "SPECDEC_READ_BLOCK_MS": "500",
    "SPECDEC_MAX_DELIVERIES": "5",
    "SPECDEC_SHUTDOWN_GRACE_S": "2",
}

TRAINER = '''\
"""Tiny trainer for specdec's reliability tests (argv: OUT TARGET SLEEP_S EXIT_CODE)."""
import json, os, shutil, sys, time

out, target, sleep_s, code = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
# The counter lies beside this script, not in the argv: files named in the argv
# are hashed into the training plan, and this one changes as the trainer runs.
counter = os.path.join(os.path.dirname(os.path.abspath(__file__)), "counter.txt")


def note(word):
    with open(counter, "a") as fh:
        fh.write(f"{word} {os.getpid()}\\n")
        fh.flush()
        os.fsync(fh.fileno())


note("start")
# Progress as toy-campaign.yaml declares it (commands.train.progress format json).
print(json.dumps({"step": 1, "total": 2, "loss": 2.5}), flush=True)
time.sleep(sleep_s)
if code:
    print(f"trainer: giving up with exit {code}: the corpus is not what I expected", file=sys.stderr, flush=True)
    sys.exit(code)
for name in os.listdir(target):
    if name.endswith((".json", ".safetensors", ".jinja", ".txt", ".model")):
        shutil.copy(os.path.join(target, name), os.path.join(out, name))
print(json.dumps({"step": 2, "total": 2, "loss": 1.5}), flush=True)
note("done")
'''


def fake_serve(speculative: bool) -> list[str]:
    # Every declared serving field a cell of the demo campaign carries (`specdec
    # submit` refuses a template that drops one) and the model: the stand-in logs
    # vLLM's start-up config for them, which the bench-runner reads back.
    argv = [sys.executable, "-m", "tests.support.fake_vllm", "--port", "{port}", "--model", "{model}",
            "--max-model-len", "{max_model_len}", "{enforce_eager_flag}"]
    return argv + ["--speculative-config", "{speculative_config_json}"] if speculative else argv


def write_trainer(folder: Path) -> Path:
    """The tiny trainer in a folder of its own; it counts in `counter_of(path)`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tiny_trainer.py"
    path.write_text(TRAINER)
    return path


def counter_of(trainer: Path) -> Path:
    return trainer.parent / "counter.txt"


def without_trainer(data: dict[str, Any]) -> dict[str, Any]:
    """A raw campaign whose cells serve no trained draft, made valid: nothing trains, so the contract
    refuses a trainer, its revision and a training pre-approval that nothing would use
    (docs/design.md#principle-1-no-inert-configuration, principle 1). Takes them out in place and returns `data`."""
    (data.get("commands") or {}).pop("train", None)
    (data.get("source_revisions") or {}).pop("trainer", None)
    review = data.get("review") or {}
    if review.get("pre_approve"):
        review["pre_approve"] = [step for step in review["pre_approve"] if step != "training"]
    return data


def write_campaign(
    path: Path,
    *,
    target: Path,
    traffic: Path,
    trainer: Path,
    trainer_sleep_s: float = 0.0,
    trainer_exit: int = 0,
    train_draft: bool = True,
    standing_serve: list[str] | None = None,
    max_model_len: int | None = None,
) -> Path:
    """The demo campaign at test sizes: 4 prompts, concurrency 1, 3 trials per cell
    (the gate's minimum, so the gate decides live), every cell on the stand-in server."""
    data = yaml.safe_load((ROOT / "infra/examples/toy-campaign.yaml").read_text())
    data["target"]["checkpoint"] = str(target)
    if max_model_len is not None:
        data["target"]["max_model_len"] = max_model_len
    data["traffic"] = {"path": str(traffic)}
    data["commands"]["train"]["argv"] = [
        sys.executable, str(trainer), "{output_dir}", "{target}", str(trainer_sleep_s), str(trainer_exit),
    ]
    data["commands"]["train"]["timeout_s"] = 120
    data["corpus"]["size"] = 120
    data["matrix"]["load"].update({"num_prompts": 4, "warmup_requests": 1, "max_output_tokens": 12})
    cells = []
    for cell in data["matrix"]["cells"]:
        if cell["serving"]["speculative"] and cell["serving"]["speculative"].get("model") and not train_draft:
            continue
        speculative = bool(cell["serving"]["speculative"])
        cell["concurrency"] = [1]
        cell["vllm_sweep"] = {"serve_cmd": fake_serve(speculative)}
        if cell["role"] == "standing" and standing_serve is not None:
            cell["vllm_sweep"]["serve_cmd"] = standing_serve
        cells.append(cell)
    data["matrix"]["cells"] = cells
    if not train_draft:
        without_trainer(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@dataclass
class Topology:
    """The services of one test, as processes it may SIGKILL and start again."""

    redis_url: str
    prefix: str
    root: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    starts: dict[str, int] = field(default_factory=dict)

    @property
    def bundle_root(self) -> Path:
        return self.root / "bundles"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "PYTHONPATH": str(ROOT),
            "SPECDEC_REDIS_URL": self.redis_url,
            "SPECDEC_STREAM_PREFIX": self.prefix,
            "SPECDEC_BUNDLE_ROOT": str(self.bundle_root),
            "PATH": os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")]),
            **FAST_DELIVERY,
            **self.extra_env,
        })
        return env

    def start(self, name: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start (or start again) one service, with `extra_env` for this start only. Its consumer
        name stays the same across restarts (`<prefix>-<name>`), as with a container restarted in place."""
        if name in self.procs and self.procs[name].poll() is None:
            raise RuntimeError(f"{name} is already running (pid {self.procs[name].pid})")
        self.logs.mkdir(parents=True, exist_ok=True)
        count = self.starts.get(name, 0) + 1
        self.starts[name] = count
        env = {**self.env, **(extra_env or {}), "SPECDEC_INSTANCE": f"{self.prefix}-{name}"}
        env.pop("SPECDEC_OPERATOR_REDIS_URL", None)  # a service never holds the operator's Redis user
        with (self.logs / f"{name}.{count}.log").open("wb") as log:
            proc = subprocess.Popen(  # fixed argv
                [sys.executable, "-m", "services.runtime.main", name], env=env, cwd=ROOT,
                stdout=log, stderr=subprocess.STDOUT,
            )
        self.procs[name] = proc
        return proc

    def start_all(self, names: Iterable[str] | None = None) -> None:
        for name in names or apps.available():
            self.start(name)

    def wait_started(self, timeout_s: float) -> None:
        """Until every running service has logged `service started` in its current log: its
        consumer groups and subscribers are up. A test that takes Redis away from a running
        topology waits for this first; one still starting would meet the outage in its start."""
        deadline = time.monotonic() + timeout_s
        waiting = set(self.procs)
        while waiting and time.monotonic() < deadline:
            for name in sorted(waiting):
                log = self.logs / f"{name}.{self.starts[name]}.log"
                if log.is_file() and '"event": "service started"' in log.read_text(errors="replace"):
                    waiting.discard(name)
            time.sleep(0.2)
        if waiting:
            raise AssertionError(f"services {sorted(waiting)} did not start within {timeout_s:g} s:\n{self.log_tail()}")

    def kill(self, name: str) -> int:
        """SIGKILL one service: no shutdown, no cleanup. Its pid."""
        proc = self.procs[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return proc.pid

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def log_tail(self, limit: int = 3000) -> str:
        parts = []
        for path in sorted(self.logs.glob("*.log")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-limit:]}")
        return "\n".join(parts)

    # --- the CLI --------------------------------------------------------------

    def cli(self, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # fixed argv
            [sys.executable, "-m", "services.cli.main", *args], env=self.env, cwd=ROOT,
            capture_output=True, text=True, timeout=timeout_s,
        )

    def submit(self, campaign: Path) -> str:
        proc = self.cli("submit", str(campaign))
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip().splitlines()[-1]

    def status(self, run_id: str) -> tuple[int, dict[str, Any]]:
        """`specdec status RUN_ID --json`: exit status and the parsed status."""
        proc = self.cli("status", run_id, "--json")
        assert proc.stdout.strip(), proc.stderr
        return proc.returncode, orjson.loads(proc.stdout)

    # --- events ---------------------------------------------------------------

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis_url)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        client = self.client()
        try:
            return run_events(client, self.prefix, run_id)
        finally:
            client.close()

    def wait(
        self, run_id: str, until: set[str], *, timeout_s: float, halt_on_failure: bool = True
    ) -> list[dict[str, Any]]:
        """Events of the run once one of `until` is there, or (by default) once the
        run halted: a `*.failed`, or capacity.unavailable."""
        deadline = time.monotonic() + timeout_s
        schemas: set[str] = set()
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None and proc.returncode != -signal.SIGKILL:
                    raise AssertionError(f"service {name} exited with {proc.returncode}:\n{self.log_tail()}")
            events = self.events(run_id)
            schemas = {e["schema"] for e in events}
            halted = any(s.endswith(".failed") for s in schemas) or "capacity.unavailable" in schemas
            if until & schemas or (halt_on_failure and halted):
                return events
            time.sleep(0.3)
        raise AssertionError(f"run {run_id} did not reach {sorted(until)} within {timeout_s}s; saw {sorted(schemas)}\n"
                             f"{self.log_tail()}")

    def settle(self, run_id: str, *, quiet_s: float = 3.0, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """Events of the run once no new one has appeared for `quiet_s` (nothing more runs)."""
        deadline = time.monotonic() + timeout_s
        seen = -1
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            events = self.events(run_id)
            if len(events) != seen:
                seen, quiet_since = len(events), time.monotonic()
            elif time.monotonic() - quiet_since >= quiet_s:
                return events
            time.sleep(0.3)
        raise AssertionError(f"run {run_id} kept producing events for {timeout_s}s")


def run_events(client: redis.Redis, prefix: str, run_id: str) -> list[dict[str, Any]]:
    """Every event of the run on `<prefix>.<schema>`, oldest first."""
    found = []
    for spec in CATALOGUE:
        for _, fields in entries(client.xrange(f"{prefix}.{spec.schema}")):
            data = orjson.loads(decode_entry(fields)[0])
            if data.get("run_id") == run_id:
                found.append(data)
    return sorted(found, key=lambda e: e["produced_at"])


def counts(events: Iterable[dict[str, Any]]) -> dict[str, int]:
    return dict(Counter(event["schema"] for event in events))


def counter_lines(path: Path) -> list[str]:
    """The trainer's start/done words, in order."""
    if not path.exists():
        return []
    return [line.split()[0] for line in path.read_text().splitlines() if line.strip()]


def journal(bundle_dir: Path) -> list[dict[str, Any]]:
    path = bundle_dir / "events.jsonl"
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def manifest_paths(bundle_dir: Path) -> set[str]:
    data = orjson.loads((bundle_dir / "manifest.json").read_bytes())
    return {artifact["path"] for artifact in data["artifacts"]}


def running_topology(redis_url: str, root: Path, kind: str) -> Iterator[Topology]:
    """A fixture's body: a topology under a fresh prefix (`<kind><8 hex>`), its services stopped and
    its keys dropped after the test."""
    topo = Topology(redis_url=redis_url, prefix=f"{kind}{uuid.uuid4().hex[:8]}", root=root / "topology")
    yield topo
    topo.stop()
    drop_keys(redis_url, topo.prefix)


def drop_keys(url: str, prefix: str) -> None:
    """Delete every key of a test's prefix (streams, groups, ledger)."""
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    except redis.RedisError:
        pass
    finally:
        client.close()


def leftovers(run_id: str) -> list[Any]:
    """Processes on this machine still labelled experiment=<run_id> (services/runtime/processes/procs.py)."""
    return [proc for proc in labelled_processes() if proc.run_id == run_id]


def dead_letters(topology: Topology, run_id: str) -> list[dict[str, Any]]:
    """The run's records on the topology's dead-letter stream."""
    client = topology.client()
    try:
        records = [orjson.loads(decode_entry(fields)[0])
                   for _, fields in entries(client.xrange(f"{topology.prefix}.deadletter"))]
    finally:
        client.close()
    return [r for r in records if r.get("run_id") == run_id]
