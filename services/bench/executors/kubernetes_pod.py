"""The Kubernetes Pod of a bench launch and its kubectl argv (pure rendering, into the plan, so an approval covers it).

A Pod has a network namespace of its own, so its port is fixed (SERVE_PORT), not picked; the run's bundle
folder is mounted at the same absolute path, so a trained draft's path in the argv means the same files in
the Pod (docs/bench-runner.md#kubernetes)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from contracts import layout
from contracts.catalogue import BENCH as SERVICE
from contracts.selectors import DEFAULT_GPU_RESOURCE, GPU_RESOURCE, problems
from services.bench.planning.model import KubernetesServe
from services.runtime.errors import ConfigurationError, parse_error_at
from services.runtime.processes.procs import EXPERIMENT_ENV, SERVICE_ENV
from services.shared.scheduler import kubernetes

SERVE_PORT = 8000
STEP = "bench"  # the specdec.io/step label of the Pods
# The Pod reads capacity.selectors image, namespace, bundle_pvc, tolerations, cpu and
# memory (services.shared.scheduler.kubernetes) and gpu_resource (below): contracts/selectors.py.


def pod_name(run_id: str, index: int) -> str:
    """A DNS-1123 name of at most 63 characters, unique per run ID and launch."""
    return kubernetes.dns_name(f"specdec-serve-{run_id}-{index}", f"{run_id}/{index}")


def label_selector(run_id: str) -> str:
    """The selector of every bench Pod of the run: what cleanup deletes."""
    return kubernetes.label_selector(run_id, STEP)


def resources(selectors: dict[str, str], *, hardware: str, tensor_parallel_size: int) -> dict[str, Any]:
    """Requests from capacity.selectors (cpu, memory); accelerators, one per tensor-parallel
    rank, unless the cell's hardware is cpu."""
    requests = kubernetes.requests(selectors)
    limits = dict(requests)
    if hardware != "cpu":
        limits[selectors.get(GPU_RESOURCE) or DEFAULT_GPU_RESOURCE] = str(tensor_parallel_size)
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
        raise ConfigurationError(f"commands.serve_pod_template is not YAML: {parse_error_at(path, exc)}") from None
    containers = ((data.get("spec") or {}).get("containers") if isinstance(data, dict) else None)
    if not isinstance(data, dict) or data.get("kind") != "Pod" or not containers:
        raise ConfigurationError(f"commands.serve_pod_template {path} must be a Kubernetes Pod with spec.containers")
    return data


def apply_pod_template(template: dict[str, Any], rendered: dict[str, Any]) -> dict[str, Any]:
    """The operator's Pod with what specdec guarantees set on it: name, namespace (the
    template's own, else the rendered one), labels, annotations, restartPolicy Never,
    the node, and on the first container the exec-form command, the label env, the
    port, the readiness probe and the bundle mount, and a toleration for each
    capacity.selectors.tolerations key the template does not tolerate yet. Image,
    resources, volumes, service account, the template's own tolerations and the rest
    stay the operator's."""
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
    tolerations = kubernetes.merge_tolerations(spec.get("tolerations"), rendered["spec"].get("tolerations") or [])
    if tolerations:
        spec["tolerations"] = tolerations
    server = rendered["spec"]["containers"][0]
    container = spec["containers"][0]
    container["command"] = server["command"]
    container.pop("args", None)
    if not container.get("image"):
        container["image"] = server["image"]
    container.setdefault("workingDir", server["workingDir"])
    # The template's own ARCTIC_INFERENCE_ENABLED goes too: every arm runs stock vLLM (executor.ARCTIC_PLUGIN_ENV).
    keep = {item["name"] for item in server["env"]} | {"ARCTIC_INFERENCE_ENABLED"}
    container["env"] = [e for e in container.get("env", []) if e.get("name") not in keep] + server["env"]
    container["ports"] = (
        [p for p in container.get("ports", []) if p.get("containerPort") != SERVE_PORT] + server["ports"]
    )
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
    _check_selectors(selectors)
    image = kubernetes.image(selectors)
    if template is not None and not image:
        # The template's own image serves; the rendered Pod below needs a placeholder only.
        image = next((c.get("image") for c in template["spec"]["containers"][:1] if c.get("image")), None)
    if not image:
        raise ConfigurationError(
            "a Kubernetes bench plan needs the serving container's image: set capacity.selectors.image "
            "or give commands.serve_pod_template a container image"
        )
    volume = kubernetes.bundle_volume(selectors, run_dir)
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
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(run_id, index),
            "namespace": kubernetes.namespace(selectors),
            "labels": kubernetes.labels(run_id, STEP),
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
    tolerations = kubernetes.tolerations(selectors)
    if tolerations:
        pod["spec"]["tolerations"] = tolerations
    return pod if template is None else apply_pod_template(template, pod)


def _check_selectors(selectors: dict[str, str]) -> None:
    """Refuse a plan whose selectors the table does not know (or whose values are malformed)
    before anything is approved: the capacity step may not have run for this bench."""
    found = problems("kubernetes", selectors)
    if found:
        raise ConfigurationError("; ".join(found))


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
    manifest_rel, log_rel = f"{folder}/{layout.K8S_POD}", f"{folder}/{layout.SERVER_LOG}"
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
        cleanup_argv=kubernetes.delete_labelled_argv("pods", namespace, run_id, STEP),
    )
