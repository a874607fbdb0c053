"""The Kubernetes Job of a training plan (pure): rendered into the plan, never applied by specdec.

What the manifest guarantees: the run's `experiment` label on the Job and its pod (cleanup's only
selector), the argv as an exec-form `command`, the selected node, `backoffLimit: 0`,
`activeDeadlineSeconds` from the campaign's timeout, and no `ttlSecondsAfterFinished`
(docs/trainer-proxy.md#the-operators-job-template-kubernetes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from contracts.catalogue import TRAINER as SERVICE
from services.runtime.errors import parse_error_at
from services.runtime.processes.procs import EXPERIMENT_ENV, SERVICE_ENV
from services.shared.scheduler import kubernetes as k8s
from services.shared.scheduler.kubernetes import bundle_volume, dns_name, labels
from services.trainer_proxy.errors import PlanError

STEP = "training"  # the specdec.io/step label of the Job
PLAN_ONLY_NOTE = (
    "specdec renders this Job but does not apply it (this release drives no Kubernetes cluster): run the "
    "apply_argv yourself, wait for the Job, then continue at the bench step (`specdec request bench {run_id}`, "
    "naming the draft as its training.output input); an approval of this plan makes training fail with this "
    "note. Manifest: {manifest}"
)
# The Job reads capacity.selectors image, namespace, bundle_pvc, cpu, memory and
# tolerations (services.shared.scheduler.kubernetes; the table is contracts/selectors.py);
# the capacity step reads label_selector and tolerations.


class KubernetesPlanError(PlanError):
    """The campaign lacks what the Job needs."""


@dataclass(frozen=True)
class RenderedJob:
    name: str
    namespace: str
    manifest: dict[str, Any]


def job_name(run_id: str) -> str:
    """A DNS-1123 name of at most 63 characters, unique per run ID."""
    return dns_name(f"specdec-train-{run_id}", run_id)


def load_template(path: str) -> dict[str, Any]:
    """The operator's Job manifest template (YAML), checked to be a batch/v1 Job with a container."""
    import yaml

    try:
        data = yaml.safe_load(open(path, encoding="utf-8").read())
    except OSError as exc:
        raise KubernetesPlanError(f"cannot read commands.train.kubernetes_job {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise KubernetesPlanError(f"commands.train.kubernetes_job is not YAML: {parse_error_at(path, exc)}") from None
    containers = ((((data or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("containers")
                  if isinstance(data, dict) else None)
    if not isinstance(data, dict) or data.get("kind") != "Job" or not containers:
        raise KubernetesPlanError(
            f"commands.train.kubernetes_job {path} must be a Kubernetes Job with spec.template.spec.containers"
        )
    return data


def apply_template(
    template: dict[str, Any], argv: list[str], *, run_id: str, node: str, timeout_s: float,
    selectors: dict[str, str] | None = None,
) -> RenderedJob:
    """The operator's Job with what specdec guarantees set on it (see the module docstring):
    its name and experiment label, the argv as the first container's exec-form command,
    the label env, the node, no retry and the deadline; a toleration for each
    capacity.selectors.tolerations key the template does not tolerate yet (the capacity
    check kept tainted nodes on that promise), and cpu/memory requests when the container
    has no resources of its own. Image, resources, volumes, service account and the rest
    stay the operator's."""
    import copy

    selectors = selectors or {}
    manifest = copy.deepcopy(template)
    metadata = manifest.setdefault("metadata", {})
    name = job_name(run_id)
    namespace = metadata.get("namespace") or k8s.namespace(selectors)  # the template's own wins
    job_labels = labels(run_id, STEP)
    metadata.update({"name": name, "namespace": namespace})
    metadata.setdefault("labels", {}).update(job_labels)
    metadata.pop("generateName", None)
    spec = manifest.setdefault("spec", {})
    spec["backoffLimit"] = 0
    spec["activeDeadlineSeconds"] = max(1, math.ceil(timeout_s))
    spec.pop("ttlSecondsAfterFinished", None)
    pod = spec["template"]
    pod.setdefault("metadata", {}).setdefault("labels", {}).update(job_labels)
    pod_spec = pod["spec"]
    pod_spec["restartPolicy"] = "Never"
    pod_spec.setdefault("nodeSelector", {})["kubernetes.io/hostname"] = node
    tolerations = k8s.merge_tolerations(pod_spec.get("tolerations"), k8s.tolerations(selectors))
    if tolerations:
        pod_spec["tolerations"] = tolerations
    container = pod_spec["containers"][0]
    container["command"] = list(argv)
    container.pop("args", None)
    requests = k8s.requests(selectors)
    if requests and "resources" not in container:
        container["resources"] = {"requests": requests, "limits": dict(requests)}
    env = [e for e in container.get("env", []) if e.get("name") not in (EXPERIMENT_ENV, SERVICE_ENV)]
    container["env"] = env + [{"name": EXPERIMENT_ENV, "value": run_id}, {"name": SERVICE_ENV, "value": SERVICE}]
    return RenderedJob(name=name, namespace=namespace, manifest=manifest)


def render_job(
    argv: list[str],
    *,
    run_id: str,
    node: str,
    selectors: dict[str, str],
    cwd: str,
    bundle_run_dir: str,
    timeout_s: float,
    template: dict[str, Any] | None = None,
) -> RenderedJob:
    if template is not None:
        return apply_template(template, argv, run_id=run_id, node=node, timeout_s=timeout_s, selectors=selectors)
    image = k8s.image(selectors)
    if not image:
        raise KubernetesPlanError(
            "a Kubernetes training Job needs the trainer's container image: set capacity.selectors.image"
        )
    namespace = k8s.namespace(selectors)
    name = job_name(run_id)
    job_labels = labels(run_id, STEP)
    # The run's bundle folder is mounted at the same absolute path in the pod,
    # so {output_dir} and the corpus paths in argv mean the same files there.
    volume = bundle_volume(selectors, bundle_run_dir)
    manifest: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": job_labels},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": max(1, math.ceil(timeout_s)),
            "template": {
                "metadata": {"labels": job_labels},
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
    pod_spec = manifest["spec"]["template"]["spec"]
    requests = k8s.requests(selectors)
    if requests:
        pod_spec["containers"][0]["resources"] = {"requests": requests, "limits": dict(requests)}
    tolerations = k8s.tolerations(selectors)
    if tolerations:
        pod_spec["tolerations"] = tolerations
    return RenderedJob(name=name, namespace=namespace, manifest=manifest)
