"""Kubernetes observer, read-only: `kubectl get nodes -o json` and `kubectl get pods -A -o json`.

An unfinished pod bound to a node occupies it; DaemonSet and static mirror pods are node
infrastructure, recorded and not counted. Labels are recorded, never read for the decision
(docs/capacity.md#how-a-node-is-judged; the selector keys are contracts/selectors.py's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from contracts.selectors import DEFAULT_GPU_RESOURCE, GPU_RESOURCE, LABEL_SELECTOR, TOLERATIONS
from services.shared.capacity.errors import SchedulerOutputInvalid
from services.shared.capacity.model import NodeView, Workload
from services.shared.capacity.observe import Observation, read_command
from services.shared.scheduler.kubernetes import EXPERIMENT_LABEL
from services.shared.scheduler.runner import CommandRunner

FINISHED_PHASES = frozenset({"Succeeded", "Failed"})
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def nodes_argv(selectors: Mapping[str, str]) -> list[str]:
    argv = ["kubectl", "get", "nodes", "-o", "json"]
    if LABEL_SELECTOR in selectors:
        argv += ["-l", selectors[LABEL_SELECTOR]]
    return argv


def pods_argv() -> list[str]:
    # Every namespace: a pod of any namespace on a node makes it busy.
    return ["kubectl", "get", "pods", "-A", "-o", "json"]


def _items(text: str, what: str) -> list[dict[str, Any]]:
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise SchedulerOutputInvalid(f"kubectl get {what} -o json did not print JSON: {exc}") from exc
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise SchedulerOutputInvalid(f"kubectl get {what} -o json printed no `items` list")
    return [item for item in items if isinstance(item, dict)]


def _quantity(value: Any) -> float | None:
    """A Kubernetes quantity (`4`, `3500m`, `16Gi`, `1000Ki`) as a number (CPUs or bytes)."""
    if value is None:
        return None
    text = str(value)
    suffixes = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    for suffix in sorted(suffixes, key=len, reverse=True):
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * suffixes[suffix]
            except ValueError:
                return None
    try:
        return float(text)
    except ValueError:
        return None


def tolerated(selectors: Mapping[str, str]) -> set[str]:
    return {key.strip() for key in selectors.get(TOLERATIONS, "").split(",") if key.strip()}


def node_blockers(node: dict[str, Any], tolerated_keys: set[str]) -> list[str]:
    """Why the cluster itself would not place work on this node: cordoned, not Ready, tainted."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    blockers = []
    if spec.get("unschedulable"):
        blockers.append("cordoned (spec.unschedulable)")
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    if not ready or ready[0].get("status") != "True":
        why = ready[0].get("reason") or ready[0].get("status") if ready else "no Ready condition"
        blockers.append(f"not Ready ({why})")
    for taint in spec.get("taints") or []:
        key, effect = taint.get("key", ""), taint.get("effect", "")
        if effect in BLOCKING_EFFECTS and key not in tolerated_keys:
            value = f"={taint['value']}" if taint.get("value") else ""
            blockers.append(
                f"tainted {key}{value}:{effect} (add {key!r} to capacity.selectors.tolerations if the pods tolerate it)"
            )
    return blockers


def parse_nodes(text: str, selectors: Mapping[str, str]) -> list[NodeView]:
    keys = tolerated(selectors)
    gpu_resource = selectors.get(GPU_RESOURCE, DEFAULT_GPU_RESOURCE)
    views = []
    for node in _items(text, "nodes"):
        meta, status = node.get("metadata") or {}, node.get("status") or {}
        allocatable = status.get("allocatable") or {}
        ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
        memory = _quantity(allocatable.get("memory"))
        gpus = _quantity(allocatable.get(gpu_resource))
        views.append(
            NodeView(
                name=meta.get("name", ""),
                state=f"Ready={ready[0].get('status')}" if ready else None,
                labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
                cpus=_quantity(allocatable.get("cpu")),
                memory_mb=round(memory / 2**20, 1) if memory is not None else None,
                gpus=int(gpus) if gpus is not None else None,
                blockers=node_blockers(node, keys),
            )
        )
    if any(not view.name for view in views):
        raise SchedulerOutputInvalid("kubectl get nodes -o json listed a node without metadata.name")
    return views


def is_infrastructure(pod: dict[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return True
    return any(owner.get("kind") == "DaemonSet" for owner in meta.get("ownerReferences") or [])


def parse_pods(text: str) -> list[tuple[str, Workload, bool]]:
    """Pods bound to a node and not finished: (node, pod, is infrastructure)."""
    found = []
    for pod in _items(text, "pods"):
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        node, phase = spec.get("nodeName"), status.get("phase", "Unknown")
        if not node or phase in FINISHED_PHASES:
            continue
        state = phase + (" (terminating)" if meta.get("deletionTimestamp") else "")
        owners = ",".join(f"{o.get('kind')}/{o.get('name')}" for o in meta.get("ownerReferences") or [])
        workload = Workload(
            kind="pod",
            ref=f"{meta.get('namespace', 'default')}/{meta.get('name', '')}",
            name=meta.get("name", ""),
            state=state,
            experiment=(meta.get("labels") or {}).get(EXPERIMENT_LABEL),
            detail=f"owner {owners}" if owners else None,
        )
        found.append((node, workload, is_infrastructure(pod)))
    return found


def assemble(nodes: list[NodeView], pods: list[tuple[str, Workload, bool]]) -> list[NodeView]:
    out = []
    for node in nodes:
        mine = [(pod, infra) for name, pod, infra in pods if name == node.name]
        out.append(
            node.model_copy(
                update={
                    "workloads": [pod for pod, infra in mine if not infra],
                    "infrastructure": [pod for pod, infra in mine if infra],
                }
            )
        )
    return out


def observe(selectors: Mapping[str, str], runner: CommandRunner) -> Observation:
    """Read the nodes and the pods on them. Reads only: nothing is applied, cordoned or evicted."""
    observation = Observation()
    nodes = parse_nodes(read_command(observation, runner, "kubectl-nodes", nodes_argv(selectors)), selectors)
    pods = parse_pods(read_command(observation, runner, "kubectl-pods", pods_argv()))
    observation.nodes = assemble(nodes, pods)
    return observation
