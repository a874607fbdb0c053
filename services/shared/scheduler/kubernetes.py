"""Kubernetes helpers the trainer's Job and the bench's Pods share.

Every object specdec renders carries the same three labels, `experiment:
<run_id>` (the only one cleanup needs), `app.kubernetes.io/managed-by:
specdec` and `specdec.io/step: <step>`; cleanup deletes by that selector
only. Names are DNS-1123 and unique per run. The run's bundle folder is
mounted at the same absolute path in every pod, so a path in an argv means
the same file there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

EXPERIMENT_LABEL = "experiment"
MAX_NAME = 63
# capacity.selectors keys a specdec pod reads (the capacity check ignores them).
IMAGE_KEY = "image"
NAMESPACE_KEY = "namespace"
PVC_KEY = "bundle_pvc"


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
    claim = selectors.get(PVC_KEY)
    if claim:
        return {"name": "bundle", "persistentVolumeClaim": {"claimName": claim}}
    return {"name": "bundle", "hostPath": {"path": run_dir, "type": "Directory"}}
