"""The keys of `capacity.selectors`: one table per scheduler, and who reads each key.

Every key an operator may set is here, with what it means, what its value looks
like and which consumers read it:

- `capacity`: the capacity step's idle check (and the same check the
  trainer-proxy and the bench-runner repeat right before they launch);
- `trainer`: the trainer-proxy's batch job (Slurm) or Job (Kubernetes);
- `bench`: the bench-runner's serving job (Slurm) or Pod (Kubernetes).

The capacity check's validation (services/shared/capacity/check.py) and the
planners refuse an unknown key naming the allowed ones, and a malformed value
naming the key and the form it needs; every consumer takes the key names from
the constants below, so a key cannot be documented under one name and read
under another. A key that no consumer reads is a defect:
tests/unit/shared/capacity/test_selectors_table.py walks this table and shows
each key changing exactly the consumers it lists. docs/capacity.md renders it
for people.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Consumer = Literal["capacity", "trainer", "bench"]
CONSUMERS: dict[Consumer, str] = {
    "capacity": "the capacity step's idle check (and the pre-launch re-check)",
    "trainer": "the trainer-proxy's batch job / Job",
    "bench": "the bench-runner's serving job / Pod",
}

# --- key names (consumers read them from here) ----------------------------------------------
# Slurm
PARTITION = "partition"
NODELIST = "nodelist"
GRES = "gres"
# Kubernetes
LABEL_SELECTOR = "label_selector"
TOLERATIONS = "tolerations"
IMAGE = "image"
NAMESPACE = "namespace"
BUNDLE_PVC = "bundle_pvc"
CPU = "cpu"
MEMORY = "memory"
GPU_RESOURCE = "gpu_resource"

DEFAULT_NAMESPACE = "default"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class SelectorKey:
    """One selector key: what it means, what a value looks like, who reads it."""

    name: str
    meaning: str
    consumers: frozenset[Consumer]
    example: str
    # A value must match this (fullmatch); `form` says in words what it needs.
    pattern: re.Pattern[str]
    form: str


def _key(name: str, meaning: str, *, consumers: set[Consumer], example: str, pattern: str, form: str) -> SelectorKey:
    return SelectorKey(name, meaning, frozenset(consumers), example, re.compile(pattern), form)


_SLURM_NAME = r"[A-Za-z0-9_.-]+"
_GRES_ITEM = r"[A-Za-z][A-Za-z0-9_.-]*(?::[A-Za-z0-9_.-]*[A-Za-z_.-][A-Za-z0-9_.-]*)?(?::[1-9][0-9]*)?"
_TAINT_KEY = r"(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_QUANTITY = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[mkMGTPE]|[eE][+-]?[0-9]+)?"
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
_DNS_SUBDOMAIN = r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?"


def _table(*keys: SelectorKey) -> dict[str, SelectorKey]:
    return {key.name: key for key in keys}


LOCAL: dict[str, SelectorKey] = {}

SLURM = _table(
    _key(PARTITION, "only nodes of this partition are candidates (sinfo --partition); the trainer's and the "
         "bench's batch jobs are submitted to it (sbatch --partition)",
         consumers={"capacity", "trainer", "bench"}, example="gpu", pattern=rf"{_SLURM_NAME}(?:,{_SLURM_NAME})*",
         form="a partition name, or several separated by commas"),
    _key(NODELIST, "only these nodes are candidates (sinfo --nodes, squeue --nodelist); the jobs are pinned to "
         "the node the capacity step selected anyway",
         consumers={"capacity"}, example="gpu[01-04]", pattern=r"[A-Za-z0-9_.,\[\]-]+",
         form="a Slurm hostlist such as gpu[01-04] or n1,n2"),
    _key(GRES, "generic resources each job needs (sbatch --gres), e.g. gpu:1 or gpu:a100:2: only nodes that "
         "have them (sinfo %G) are candidates, and the trainer's and the bench's batch jobs ask for them",
         consumers={"capacity", "trainer", "bench"}, example="gpu:1", pattern=rf"{_GRES_ITEM}(?:,{_GRES_ITEM})*",
         form="name[:type][:count] items separated by commas, e.g. gpu:1 or gpu:a100:2,nvme:1"),
)

KUBERNETES = _table(
    _key(LABEL_SELECTOR, "only nodes matching this label selector are candidates (kubectl get nodes -l ...)",
         consumers={"capacity"}, example="pool=gpu", pattern=r"\S(?:.*\S)?",
         form="a kubectl label selector such as pool=gpu,zone!=b"),
    _key(TOLERATIONS, "taint keys the trainer's Job and the bench's Pods tolerate: a node tainted NoSchedule or "
         "NoExecute with a key not listed is ruled out, and each key becomes a toleration (operator Exists) on "
         "the Job and the Pods",
         consumers={"capacity", "trainer", "bench"}, example="nvidia.com/gpu",
         pattern=rf"\s*{_TAINT_KEY}\s*(?:,\s*{_TAINT_KEY}\s*)*",
         form="taint keys separated by commas, e.g. nvidia.com/gpu,dedicated"),
    _key(IMAGE, "container image of the trainer's Job and the bench's Pods (a template's own image wins)",
         consumers={"trainer", "bench"}, example="registry.example/vllm:0.11", pattern=r"\S+",
         form="an image reference without spaces"),
    _key(NAMESPACE, f"namespace of the trainer's Job and the bench's Pods (default {DEFAULT_NAMESPACE})",
         consumers={"trainer", "bench"}, example="ml", pattern=_DNS_LABEL,
         form="a DNS-1123 label: lowercase letters, digits and '-', at most 63"),
    _key(BUNDLE_PVC, "PersistentVolumeClaim holding the evidence bundle, mounted at the bundle's path in the Job "
         "and the Pods (default: the node's folder, hostPath)",
         consumers={"trainer", "bench"}, example="specdec-bundles", pattern=_DNS_SUBDOMAIN,
         form="a PersistentVolumeClaim name (DNS-1123 subdomain)"),
    _key(CPU, "CPU request and limit of the trainer's and each server's container",
         consumers={"trainer", "bench"}, example="8", pattern=_QUANTITY,
         form="a Kubernetes quantity such as 8 or 3500m"),
    _key(MEMORY, "memory request and limit of the trainer's and each server's container",
         consumers={"trainer", "bench"}, example="32Gi", pattern=_QUANTITY,
         form="a Kubernetes quantity such as 32Gi or 64G"),
    _key(GPU_RESOURCE, f"extended resource of the accelerators a server needs (default {DEFAULT_GPU_RESOURCE}): "
         "a cell whose hardware is not cpu gets one per tensor-parallel rank; the trainer's accelerators come "
         "from its Job template (commands.train.kubernetes_job); the capacity snapshot records each node's "
         "allocatable count of it",
         consumers={"bench"}, example="amd.com/gpu", pattern=_TAINT_KEY,
         form="an extended resource name such as nvidia.com/gpu"),
)

TABLES: dict[str, dict[str, SelectorKey]] = {"local": LOCAL, "slurm": SLURM, "kubernetes": KUBERNETES}


def allowed(scheduler: str) -> str:
    """The allowed keys of a scheduler in words: `partition (...), nodelist (...)`, or `none`."""
    return ", ".join(f"{key.name} ({key.meaning})" for key in TABLES[scheduler].values()) or "none"


def problems(scheduler: str, selectors: Mapping[str, str]) -> list[str]:
    """Everything wrong with `selectors` for `scheduler`, each naming the key and what to do;
    empty when every key is known and every value has its form."""
    table = TABLES[scheduler]
    unknown = sorted(set(selectors) - set(table))
    found = []
    if unknown:
        names = ", ".join(table) or "none (remove capacity.selectors)"
        found.append(
            f"capacity.selectors {unknown} mean nothing to scheduler {scheduler}; allowed: {names}. "
            f"Keys: {allowed(scheduler)}"
        )
    for name, key in table.items():
        if name in selectors and not key.pattern.fullmatch(str(selectors[name])):
            found.append(f"capacity.selectors.{name} = {selectors[name]!r} is not {key.form}")
    return found


@dataclass(frozen=True)
class Gres:
    """One generic-resource item, `name[:type][:count]` (Slurm's --gres syntax)."""

    name: str
    type: str | None
    count: int

    def __str__(self) -> str:
        return ":".join([self.name, *([self.type] if self.type else []), str(self.count)])


def parse_gres(text: str) -> list[Gres]:
    """`gpu:1`, `gpu:a100:2`, `nvme` (count 1) ... separated by commas. A last field of
    digits is the count; a middle field is the type. Raises ValueError on a malformed item."""
    items = []
    for raw in (part.strip() for part in text.split(",")):
        if not re.fullmatch(_GRES_ITEM, raw):
            raise ValueError(f"{raw!r} is not name[:type][:count]")
        fields = raw.split(":")
        count = int(fields.pop()) if len(fields) > 1 and fields[-1].isdigit() else 1
        items.append(Gres(name=fields[0], type=fields[1] if len(fields) > 1 else None, count=count))
    return items
