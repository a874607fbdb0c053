"""The Kubernetes serving executor: one labelled Pod per launch of a bench plan.

Each launch applies the Pod its plan shows (rendered by
services.bench.executors.kubernetes_pod) and drives kubectl by argv: apply, wait for
Ready, port-forward from a labelled child process, capture `kubectl logs`
into the bundle, delete; cleanup deletes by label only. Only the plan is
tested in specdec's suite (no cluster runs next to it). Without kubectl on
PATH the step fails before any launch.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from contracts.catalogue import BENCH as SERVICE
from services.bench.errors import ServerNotReady, ServingError
from services.bench.executors.executor import free_port, log_tail
from services.bench.planning.model import CellPlan, KubernetesServe, Launch
from services.runtime.bundle.bundle import BundleStore
from services.runtime.errors import StepFailed
from services.runtime.processes.procs import kill_group, spawn
from services.shared.scheduler.errors import SchedulerError
from services.shared.scheduler.health import wait_healthy
from services.shared.scheduler.runner import RunResult, run_short

POLL_S = 0.5


def require_kubectl() -> None:
    """Before any launch: a Kubernetes plan needs kubectl on PATH."""
    if shutil.which("kubectl") is None:
        raise StepFailed(
            "the bench plan serves on Kubernetes but kubectl is not on the bench-runner's PATH: install kubectl "
            "and give it a kubeconfig allowed to create, watch and delete pods in the plan's namespace, "
            "or apply the plan's manifests yourself", error_type="KubectlMissing")


# --- execution (not exercised by specdec's tests: no cluster) ---------------------


async def _kubectl(argv: list[str], timeout_s: float = 60.0) -> RunResult:
    """A kubectl command; what keeps it from answering fails the launch (ServingError)."""
    try:
        return await asyncio.to_thread(run_short, argv, timeout_s=timeout_s)
    except SchedulerError as exc:
        raise ServingError(str(exc)) from None


class KubernetesServed:
    def __init__(self, block: KubernetesServe, run_id: str, run_dir: Path) -> None:
        self.block = block
        self.run_id = run_id
        self.run_dir = run_dir
        self.base_url = ""
        self.files = [block.log_path, block.manifest_path]
        self.forward: subprocess.Popen[bytes] | None = None

    def record(self) -> dict[str, Any]:
        return {"pod": self.block.pod_name, "namespace": self.block.namespace, "apply_argv": self.block.apply_argv}

    async def wait_ready(self, timeout_s: float) -> float:
        started = time.monotonic()
        done = await _kubectl(self.block.wait_argv, timeout_s=timeout_s + 30)
        if done.exit_code != 0:
            await self._capture_log()
            raise ServerNotReady(
                f"pod {self.block.pod_name} was not Ready within {timeout_s:.0f}s: {done.stderr.strip()}\n"
                f"log tail:\n{log_tail(self.run_dir / self.block.log_path)}")
        port = free_port()
        argv = [token.replace("{local_port}", str(port)) for token in self.block.port_forward_argv]
        self.forward = spawn(argv, run_id=self.run_id, service=SERVICE)
        self.base_url = f"http://127.0.0.1:{port}"

        async def locate() -> str:
            return self.base_url

        def not_ready() -> ServerNotReady:
            return ServerNotReady(f"pod {self.block.pod_name} is Ready but /health through {argv} did not answer "
                                  f"within {timeout_s:.0f}s")

        # The deadline counts from before `kubectl wait`: one readiness timeout in all.
        return await wait_healthy(locate, timeout_s=timeout_s, poll_s=POLL_S, not_ready=not_ready, started=started)

    async def log_text(self) -> str:
        # The Pod's log lives in the cluster until stop() captures it into the bundle.
        done = await _kubectl(self.block.logs_argv)
        return done.stdout if done.exit_code == 0 else ""

    async def _capture_log(self) -> None:
        done = await _kubectl(self.block.logs_argv)
        path = self.run_dir / self.block.log_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(done.stdout if done.exit_code == 0 else f"(kubectl logs failed: {done.stderr.strip()})\n")

    async def stop(self) -> None:
        if self.forward is not None:
            await asyncio.to_thread(kill_group, self.forward.pid, grace_s=2.0)
        await self._capture_log()
        await _kubectl(self.block.delete_argv)


class KubernetesExecutor:
    """Serves each launch as the Pod its plan shows, through kubectl."""

    def __init__(self, run_id: str, bundle: BundleStore, cleanup_argv: list[str]) -> None:
        self.run_id = run_id
        self.bundle = bundle
        self.cleanup_argv = cleanup_argv

    async def prepare(self) -> list[str]:
        # kubectl's presence was checked before this executor was made (app.make_executor).
        return await self.cleanup()

    async def start(self, index: int, step: Launch, cell: CellPlan, folder: str) -> KubernetesServed:
        block = step.kubernetes
        if block is None:
            raise ServingError(f"launch {index} of the plan has no Kubernetes Pod; re-plan the bench step")
        self.bundle.write_bytes(self.run_id, block.manifest_path, json.dumps(block.manifest, indent=2).encode())
        done = await _kubectl(block.apply_argv)
        if done.exit_code != 0:
            raise ServingError(
                f"kubectl apply exited {done.exit_code}: {done.stderr.strip()}; argv: {block.apply_argv}"
            )
        return KubernetesServed(block, self.run_id, self.bundle.run_dir(self.run_id).absolute())

    async def cleanup(self) -> list[str]:
        if not self.cleanup_argv:
            return []
        done = await _kubectl(self.cleanup_argv)
        if done.exit_code != 0:
            raise ServingError(f"kubectl delete by label exited {done.exit_code}: {done.stderr.strip()}")
        return [line for line in done.stdout.splitlines() if line.strip()]
