"""The Kubernetes Job of a training plan (pure): rendered, labelled, not applied.

No cluster runs next to specdec's tests, so this release renders the Job into
the plan (and the bundle) and stops there: an approved Kubernetes plan fails
with `training.failed` saying so, and the operator applies the manifest
(docs/trainer-proxy.md). What the manifest guarantees:
- `metadata.labels.experiment` and the pod template's label are the run ID,
  the only selector cleanup uses;
- the container's `command` is the argv list (exec form: no shell);
- the pod is pinned to the selected node; `backoffLimit: 0` (a failed trainer
  is not retried behind the operator's back) and `activeDeadlineSeconds` is
  the campaign's timeout;
- no `ttlSecondsAfterFinished`: nothing is garbage-collected before its
  outputs are captured.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

from contracts.catalogue import TRAINER as SERVICE
from services.runtime.procs import EXPERIMENT_ENV, SERVICE_ENV
from services.trainer_proxy.errors import PlanError

MANIFEST_PATH = "training/job.json"
MAX_NAME = 63
PLAN_ONLY_NOTE = (
    "specdec renders this Job but does not apply it (this release drives no Kubernetes cluster): run the "
    "apply_argv yourself, wait for the Job, then continue at the bench step (`specdec request bench {run_id}`, "
    "naming the draft as its training.output input); an approval of this plan makes training fail with this "
    "note. Manifest: {manifest}"
)
# Selector keys the Job reads (capacity.selectors); the capacity step reads label_selector.
IMAGE_KEY = "image"
NAMESPACE_KEY = "namespace"
PVC_KEY = "bundle_pvc"


class KubernetesPlanError(PlanError):
    """The campaign lacks what the Job needs."""


@dataclass(frozen=True)
class RenderedJob:
    name: str
    namespace: str
    manifest: dict[str, Any]


def job_name(run_id: str) -> str:
    """A DNS-1123 name of at most 63 characters, unique per run ID."""
    name = f"specdec-train-{run_id}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9].rstrip('-')}-{digest}"


def render_job(
    argv: list[str],
    *,
    run_id: str,
    node: str,
    selectors: dict[str, str],
    cwd: str,
    bundle_run_dir: str,
    timeout_s: float,
) -> RenderedJob:
    image = selectors.get(IMAGE_KEY)
    if not image:
        raise KubernetesPlanError(
            "a Kubernetes training Job needs the trainer's container image: set capacity.selectors.image"
        )
    namespace = selectors.get(NAMESPACE_KEY, "default")
    name = job_name(run_id)
    labels = {"experiment": run_id, "app.kubernetes.io/managed-by": "specdec", "specdec.io/step": "training"}
    claim = selectors.get(PVC_KEY)
    # The run's bundle folder is mounted at the same absolute path in the pod,
    # so {output_dir} and the corpus paths in argv mean the same files there.
    volume: dict[str, Any] = (
        {"name": "bundle", "persistentVolumeClaim": {"claimName": claim}}
        if claim
        else {"name": "bundle", "hostPath": {"path": bundle_run_dir, "type": "Directory"}}
    )
    manifest: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": max(1, math.ceil(timeout_s)),
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "containers": [
                        {
                            "name": "trainer",
                            "image": image,
                            "command": list(argv),
                            "workingDir": cwd,
                            "env": [
                                {"name": EXPERIMENT_ENV, "value": run_id},
                                {"name": SERVICE_ENV, "value": SERVICE},
                            ],
                            "volumeMounts": [{"name": "bundle", "mountPath": bundle_run_dir}],
                        }
                    ],
                    "volumes": [volume],
                },
            },
        },
    }
    return RenderedJob(name=name, namespace=namespace, manifest=manifest)
