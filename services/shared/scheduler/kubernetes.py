"""Kubernetes helpers the trainer's Job and the bench's Pods share.

Every object specdec renders carries `experiment: <run_id>` (the only label cleanup selects by),
`app.kubernetes.io/managed-by: specdec` and `specdec.io/step: <step>`; names are DNS-1123 and unique
per run, and the bundle folder is mounted at the same absolute path in every pod.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from contracts.selectors import BUNDLE_PVC, CPU, DEFAULT_NAMESPACE, IMAGE, MEMORY, NAMESPACE, TOLERATIONS

EXPERIMENT_LABEL = "experiment"
MAX_NAME = 63


def labels(run_id: str, step: str) -> dict[str, str]:
    return {EXPERIMENT_LABEL: run_id, "app.kubernetes.io/managed-by": "specdec", "specdec.io/step": step}


def label_selector(run_id: str, step: str) -> str:
    return ",".join(f"{key}={value}" for key, value in labels(run_id, step).items())


def delete_labelled_argv(kind: str, namespace: str, run_id: str, step: str) -> list[str]:
    """kubectl argv that deletes every `kind` of this run and step, selected by label only."""
    return ["kubectl", "delete", kind, "-n", namespace, "-l", label_selector(run_id, step), "--ignore-not-found"]


def dns_name(name: str, key: str) -> str:
    """`name` when it is a short enough DNS-1123 name; else cut, with a digest of `key`
    (what makes it unique: the run ID, a launch) so two long names stay apart."""
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(key.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9].rstrip('-')}-{digest}"


def bundle_volume(selectors: Mapping[str, str], run_dir: str) -> dict[str, Any]:
    """The `bundle` volume of a specdec pod: the PVC named by selectors.bundle_pvc, else the
    run's folder from the node (hostPath), mounted at the same absolute path."""
    claim = selectors.get(BUNDLE_PVC)
    if claim:
        return {"name": "bundle", "persistentVolumeClaim": {"claimName": claim}}
    return {"name": "bundle", "hostPath": {"path": run_dir, "type": "Directory"}}


def image(selectors: Mapping[str, str]) -> str | None:
    """selectors.image: the container image of a rendered Job or Pod."""
    return selectors.get(IMAGE) or None


def namespace(selectors: Mapping[str, str]) -> str:
    """selectors.namespace, else `default`."""
    return selectors.get(NAMESPACE) or DEFAULT_NAMESPACE


def tolerations(selectors: Mapping[str, str]) -> list[dict[str, str]]:
    """One toleration (operator Exists, any effect) per taint key of selectors.tolerations:
    the capacity check let a node with those taints stay a candidate because the operator
    said specdec's pods tolerate them, so the pods must."""
    keys = [key.strip() for key in selectors.get(TOLERATIONS, "").split(",") if key.strip()]
    return [{"key": key, "operator": "Exists"} for key in dict.fromkeys(keys)]


def merge_tolerations(existing: list[dict[str, Any]] | None, wanted: list[dict[str, str]]) -> list[dict[str, Any]]:
    """An operator template's tolerations plus each of `wanted` (tolerations(selectors)) whose
    key it does not tolerate yet; the template's own entries stay as they are."""
    present = list(existing or [])
    keys = {item.get("key") for item in present}
    return present + [item for item in wanted if item["key"] not in keys]


def requests(selectors: Mapping[str, str]) -> dict[str, str]:
    """cpu and memory from capacity.selectors, as a container's requests (and limits)."""
    return {key: selectors[key] for key in (CPU, MEMORY) if selectors.get(key)}
