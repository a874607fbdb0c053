"""What the guard's checkers run against: the complete example campaign and the
inputs its consumers read (traffic files, operator manifest templates, a
working folder holding the target, gate trials, recorded scheduler outputs),
built once per session."""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from contracts.envelope import ArtifactRef
from services.runtime.bundle.bundle import BundleStore
from services.trainer_proxy.planning.builder import PlanPaths
from services.trainer_proxy.planning.model import PlanInputs

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "infra/examples/campaign.yaml"
TRAFFIC = ROOT / "infra/examples/sample-traffic.jsonl"
SCHEDULER_OUTPUTS = ROOT / "tests/unit/shared/capacity/fixtures"
RUN = "toy-20261130-010101-abcdef"
OTHER_RUN = "toy-20261130-020202-fedcba"
SHA = "a" * 64
PATHS = PlanPaths(
    run_dir=f"/bundles/{RUN}",
    cwd="/srv/specdec",
    corpus=f"/bundles/{RUN}/corpus/CORPUS.jsonl",
    corpus_train=f"/bundles/{RUN}/training/corpus-train.jsonl",
    corpus_heldout=f"/bundles/{RUN}/training/corpus-heldout.jsonl",
)


def ref(path: str, run_id: str = RUN) -> ArtifactRef:
    return ArtifactRef(uri=f"bundle://{run_id}/{path}", sha256=SHA, size_bytes=10)


INPUTS = PlanInputs(
    corpus=ref("corpus/CORPUS.jsonl"), corpus_train=ref("training/corpus-train.jsonl"),
    corpus_heldout=ref("training/corpus-heldout.jsonl"), train_records=6, heldout_records=2, rejected_lines=0,
)


@dataclass
class Ctx:
    tmp: Path
    traffic_other: Path  # a different traffic file (a part of the sample)
    traffic_dirty: Path  # the sample with 3 % malformed lines
    job_template: Path  # an operator's Kubernetes Job template
    pod_template: Path  # an operator's Kubernetes Pod template for the bench servers
    workdir: Path  # where the trainer-proxy runs: holds the target, so the training input key can be computed
    gate_baseline: list[Any]
    gate_candidates: dict[str, list[Any]]  # a candidate better on TPOT and throughput, worse on TTFT p99
    counter: int = 0
    caches: dict[str, dict[str, Any]] = field(default_factory=dict)

    def fresh_bundle(self) -> BundleStore:
        self.counter += 1
        return BundleStore(self.tmp / f"bundle-{self.counter}", fsync=False)

    def file(self, name: str, text: str) -> Path:
        """A file with this content (named by its hash: the same content is the same path)."""
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        path = self.tmp / "files" / digest / name
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return path

    def cache(self, name: str) -> dict[str, Any]:
        return self.caches.setdefault(name, {})

    def forget(self) -> None:
        """Drop every observation (a consumer was patched); keep the runs built in bundles."""
        for name in list(self.caches):
            if name not in ("runs", "earlier", "profile"):
                del self.caches[name]

    @property
    def profile(self) -> bytes:
        """PROFILE.json of the sample traffic."""
        cache = self.cache("profile")
        if "bytes" not in cache:
            from services.profiler.profile import profile_traffic

            cache["bytes"] = profile_traffic(TRAFFIC, reject_threshold=0.05).model_dump_json().encode()
        return cache["bytes"]


def example() -> dict[str, Any]:
    return copy.deepcopy(_EXAMPLE)


_EXAMPLE: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())


def _scaled(trials: list[Any], metric: str, factor: float) -> list[Any]:
    return [replace(t, summary={**t.summary, metric: t.summary[metric] * factor}) for t in trials]


def build_context(tmp: Path) -> Ctx:
    from tests.unit.gate.test_decide import arm

    lines = TRAFFIC.read_text().splitlines()
    other = tmp / "traffic-other.jsonl"
    other.write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    dirty = tmp / "traffic-dirty.jsonl"
    dirty.write_text("\n".join(lines + ["{not json"] * (len(lines) * 3 // 100)) + "\n")
    template = tmp / "job.yaml"
    template.write_text("apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n"
                        "      containers: [{name: main, image: registry/operator:2}]\n")
    pod_template = tmp / "pod.yaml"
    pod_template.write_text("apiVersion: v1\nkind: Pod\nspec:\n  serviceAccountName: bench\n"
                            "  containers: [{name: vllm, image: registry/vllm:ops}]\n")
    workdir = tmp / "workdir"
    target = workdir / _EXAMPLE["target"]["checkpoint"]
    target.mkdir(parents=True)
    (target / "config.json").write_text('{"model_type": "llama"}\n')
    candidate = _scaled(arm(2, "ngram-k3", factor=0.7), "p99_ttft_ms", 2.0)
    return Ctx(
        tmp=tmp, traffic_other=other, traffic_dirty=dirty, job_template=template, pod_template=pod_template,
        workdir=workdir, gate_baseline=arm(1, "standing"), gate_candidates={"ngram-k3": candidate},
    )
