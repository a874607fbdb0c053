"""The Kubernetes serving executor: one labelled Pod per launch of a bench plan.

Rendering (pure, into the plan, so an approval covers it): per launch, a Pod
that runs the cell's serve argv in exec form (no shell), labelled
`experiment: <run_id>`, `app.kubernetes.io/managed-by: specdec` and
`specdec.io/step: bench`, pinned to the plan's node, with the resources the
campaign's selectors ask for; and the kubectl argv that would apply it, wait
for it, reach it (port-forward), delete it, and clean up by label.

A Pod has a network namespace of its own, so the port is fixed (SERVE_PORT)
rather than picked. The run's bundle folder is mounted at the same absolute
path (hostPath, or the PVC named by capacity.selectors.bundle_pvc) so a
trained draft's path in the argv means the same files in the Pod.

Only the plan is tested in specdec's suite (no cluster runs next to it). The
execution below drives kubectl by argv: apply, wait for Ready, port-forward
from a labelled child process, capture `kubectl logs` into the bundle, delete.
Without kubectl on PATH the step fails before any launch.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import Field

from contracts.envelope import Strict
from services.bench.executor import SERVICE, ServerNotReady, ServingError, free_port, log_tail
from services.runtime.errors import ConfigurationError, SpecdecError, StepFailed
from services.runtime.procs import EXPERIMENT_ENV, SERVICE_ENV, kill_group, spawn
from services.trainer_proxy.kubernetes import IMAGE_KEY, NAMESPACE_KEY, bundle_volume
from services.trainer_proxy.monitor import run_short

if TYPE_CHECKING:
    from services.bench.plan import CellPlan, Launch
    from services.runtime.bundle import BundleStore

SERVE_PORT = 8000
MANIFEST_FILE = "pod.json"
LOG_FILE = "server.log"
MAX_NAME = 63
# capacity.selectors keys the Pod reads besides image, namespace and bundle_pvc.
CPU_KEY = "cpu"
MEMORY_KEY = "memory"
GPU_RESOURCE_KEY = "gpu_resource"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
POLL_S = 0.5


class KubernetesServe(Strict):
    """One server start as a Kubernetes Pod: the manifest and every kubectl argv, verbatim."""

    namespace: str = Field(description="Namespace of the Pod (capacity.selectors.namespace, else default).")
    pod_name: str = Field(description="The Pod's name: DNS-1123, unique per run and launch.")
    node: str = Field(description="The node the Pod is pinned to (nodeSelector kubernetes.io/hostname).")
    manifest: dict[str, Any] = Field(description="The Pod manifest, labelled experiment=<run_id>.")
    manifest_path: str = Field(description="Bundle path the manifest is written to before kubectl applies it.")
    log_path: str = Field(description="Bundle path the server's log (kubectl logs) is captured to before deletion.")
    apply_argv: list[str] = Field(description="kubectl argv that creates the Pod.")
    wait_argv: list[str] = Field(description="kubectl argv that waits for the Pod to be Ready (readiness deadline).")
    port_forward_argv: list[str] = Field(description="kubectl argv that reaches the server; {local_port} is picked at launch.")
    logs_argv: list[str] = Field(description="kubectl argv whose output becomes the server log.")
    delete_argv: list[str] = Field(description="kubectl argv that deletes this Pod after its results are captured.")
    cleanup_argv: list[str] = Field(description="kubectl argv that deletes every bench Pod of the run, by label only.")


# --- rendering (pure) -------------------------------------------------------------


def pod_name(run_id: str, index: int) -> str:
    """A DNS-1123 name of at most 63 characters, unique per run ID and launch."""
    name = f"specdec-serve-{run_id}-{index}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(f"{run_id}/{index}".encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9].rstrip('-')}-{digest}"


def labels(run_id: str) -> dict[str, str]:
    return {"experiment": run_id, "app.kubernetes.io/managed-by": "specdec", "specdec.io/step": "bench"}


def label_selector(run_id: str) -> str:
    return ",".join(f"{key}={value}" for key, value in labels(run_id).items())


def resources(selectors: dict[str, str], *, hardware: str, tensor_parallel_size: int) -> dict[str, Any]:
    """Requests from capacity.selectors (cpu, memory); accelerators, one per tensor-parallel
    rank, unless the cell's hardware is cpu."""
    requests = {key: selectors[key] for key in (CPU_KEY, MEMORY_KEY) if selectors.get(key)}
    limits = dict(requests)
    if hardware != "cpu":
        limits[selectors.get(GPU_RESOURCE_KEY, DEFAULT_GPU_RESOURCE)] = str(tensor_parallel_size)
    out: dict[str, Any] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def load_pod_template(path: str) -> dict[str, Any]:
    """The operator's Pod manifest template (commands.serve_pod_template), checked to be a Pod with a container."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"cannot read commands.serve_pod_template {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"commands.serve_pod_template {path} is not YAML: {exc}") from None
    containers = ((data.get("spec") or {}).get("containers") if isinstance(data, dict) else None)
    if not isinstance(data, dict) or data.get("kind") != "Pod" or not containers:
        raise ConfigurationError(f"commands.serve_pod_template {path} must be a Kubernetes Pod with spec.containers")
    return data


def apply_pod_template(template: dict[str, Any], rendered: dict[str, Any]) -> dict[str, Any]:
    """The operator's Pod with what specdec guarantees set on it: name, namespace (the
    template's own, else the rendered one), labels, annotations, restartPolicy Never,
    the node, and on the first container the exec-form command, the label env, the
    port, the readiness probe and the bundle mount. Image, resources, volumes, service
    account, tolerations and the rest stay the operator's."""
    import copy

    pod = copy.deepcopy(template)
    ours = rendered["metadata"]
    metadata = pod.setdefault("metadata", {})
    metadata.pop("generateName", None)
    metadata["name"] = ours["name"]
    metadata["namespace"] = metadata.get("namespace") or ours["namespace"]
    metadata.setdefault("labels", {}).update(ours["labels"])
    metadata.setdefault("annotations", {}).update(ours["annotations"])
    spec = pod["spec"]
    spec["restartPolicy"] = "Never"
    spec.setdefault("nodeSelector", {}).update(rendered["spec"]["nodeSelector"])
    server = rendered["spec"]["containers"][0]
    container = spec["containers"][0]
    container["command"] = server["command"]
    container.pop("args", None)
    if not container.get("image"):
        container["image"] = server["image"]
    container.setdefault("workingDir", server["workingDir"])
    keep = {item["name"] for item in server["env"]}
    container["env"] = [e for e in container.get("env", []) if e.get("name") not in keep] + server["env"]
    container["ports"] = [p for p in container.get("ports", []) if p.get("containerPort") != SERVE_PORT] + server["ports"]
    container["readinessProbe"] = server["readinessProbe"]
    if "resources" not in container and "resources" in server:
        container["resources"] = server["resources"]
    mounts = [m for m in container.get("volumeMounts", []) if m.get("name") != "bundle"]
    container["volumeMounts"] = mounts + server["volumeMounts"]
    volumes = [v for v in spec.get("volumes", []) if v.get("name") != "bundle"]
    spec["volumes"] = volumes + rendered["spec"]["volumes"]
    return pod


def render_manifest(
    argv: list[str], *, run_id: str, index: int, cell_id: str, node: str, selectors: dict[str, str],
    run_dir: str, cwd: str, hardware: str, tensor_parallel_size: int, template: dict[str, Any] | None = None,
) -> dict[str, Any]:
    image = selectors.get(IMAGE_KEY)
    if template is not None and not image:
        # The template's own image serves; the rendered Pod below needs a placeholder only.
        image = next((c.get("image") for c in template["spec"]["containers"][:1] if c.get("image")), None)
    if not image:
        raise ConfigurationError(
            "a Kubernetes bench plan needs the serving container's image: set capacity.selectors.image "
            "or give commands.serve_pod_template a container image"
        )
    volume = bundle_volume(selectors, run_dir)
    container: dict[str, Any] = {
        "name": "server",
        "image": image,
        "command": [token.replace("{port}", str(SERVE_PORT)) for token in argv],
        "workingDir": cwd,
        "ports": [{"name": "http", "containerPort": SERVE_PORT}],
        "env": [{"name": EXPERIMENT_ENV, "value": run_id}, {"name": SERVICE_ENV, "value": SERVICE}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": SERVE_PORT}, "periodSeconds": 2},
        "volumeMounts": [{"name": "bundle", "mountPath": run_dir}],
    }
    limits = resources(selectors, hardware=hardware, tensor_parallel_size=tensor_parallel_size)
    if limits:
        container["resources"] = limits
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(run_id, index),
            "namespace": selectors.get(NAMESPACE_KEY, "default"),
            "labels": labels(run_id),
            "annotations": {"specdec.io/cell": cell_id, "specdec.io/launch": str(index)},
        },
        "spec": {
            # A server that dies is a failed cell, never restarted behind the runner's back.
            "restartPolicy": "Never",
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [container],
            "volumes": [volume],
        },
    }
    return pod if template is None else apply_pod_template(template, pod)


def render_launch(
    argv: list[str], *, run_id: str, index: int, cell_id: str, node: str, selectors: dict[str, str],
    run_dir: str, cwd: str, folder: str, hardware: str, tensor_parallel_size: int, readiness_timeout_s: float,
    template: dict[str, Any] | None = None,
) -> KubernetesServe:
    manifest = render_manifest(
        argv, run_id=run_id, index=index, cell_id=cell_id, node=node, selectors=selectors, run_dir=run_dir,
        cwd=cwd, hardware=hardware, tensor_parallel_size=tensor_parallel_size, template=template,
    )
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    manifest_rel, log_rel = f"{folder}/{MANIFEST_FILE}", f"{folder}/{LOG_FILE}"
    return KubernetesServe(
        namespace=namespace,
        pod_name=name,
        node=node,
        manifest=manifest,
        manifest_path=manifest_rel,
        log_path=log_rel,
        apply_argv=["kubectl", "apply", "-n", namespace, "-f", f"{run_dir}/{manifest_rel}"],
        wait_argv=["kubectl", "wait", "-n", namespace, "--for=condition=Ready", f"pod/{name}",
                   f"--timeout={max(1, math.ceil(readiness_timeout_s))}s"],
        port_forward_argv=["kubectl", "port-forward", "-n", namespace, f"pod/{name}", f"{{local_port}}:{SERVE_PORT}"],
        logs_argv=["kubectl", "logs", "-n", namespace, f"pod/{name}"],
        delete_argv=["kubectl", "delete", "pod", "-n", namespace, name, "--ignore-not-found", "--wait=false"],
        cleanup_argv=["kubectl", "delete", "pods", "-n", namespace, "-l", label_selector(run_id), "--ignore-not-found"],
    )


def require_kubectl() -> None:
    """Before any launch: a Kubernetes plan needs kubectl on PATH."""
    if shutil.which("kubectl") is None:
        raise StepFailed(
            "the bench plan serves on Kubernetes but kubectl is not on the bench-runner's PATH: install kubectl "
            "and give it a kubeconfig allowed to create, watch and delete pods in the plan's namespace, "
            "or apply the plan's manifests yourself", error_type="KubectlMissing")


# --- execution (not exercised by specdec's tests: no cluster) ---------------------


async def _kubectl(argv: list[str], timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    try:
        return await asyncio.to_thread(run_short, argv, timeout_s=timeout_s)
    except SpecdecError as exc:
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
        if done.returncode != 0:
            await self._capture_log()
            raise ServerNotReady(
                f"pod {self.block.pod_name} was not Ready within {timeout_s:.0f}s: {done.stderr.strip()}\n"
                f"log tail:\n{log_tail(self.run_dir / self.block.log_path)}")
        port = free_port()
        argv = [token.replace("{local_port}", str(port)) for token in self.block.port_forward_argv]
        self.forward = spawn(argv, run_id=self.run_id, service=SERVICE)
        self.base_url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() - started <= timeout_s:
                try:
                    if (await client.get(f"{self.base_url}/health")).status_code == 200:
                        return time.monotonic() - started
                except httpx.TransportError:
                    pass
                await asyncio.sleep(POLL_S)
        raise ServerNotReady(f"pod {self.block.pod_name} is Ready but /health through {argv} did not answer "
                             f"within {timeout_s:.0f}s")

    async def _capture_log(self) -> None:
        done = await _kubectl(self.block.logs_argv)
        path = self.run_dir / self.block.log_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(done.stdout if done.returncode == 0 else f"(kubectl logs failed: {done.stderr.strip()})\n")

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
        if done.returncode != 0:
            raise ServingError(f"kubectl apply exited {done.returncode}: {done.stderr.strip()}; argv: {block.apply_argv}")
        return KubernetesServed(block, self.run_id, self.bundle.run_dir(self.run_id).absolute())

    async def cleanup(self) -> list[str]:
        if not self.cleanup_argv:
            return []
        done = await _kubectl(self.cleanup_argv)
        if done.returncode != 0:
            raise ServingError(f"kubectl delete by label exited {done.returncode}: {done.stderr.strip()}")
        return [line for line in done.stdout.splitlines() if line.strip()]
