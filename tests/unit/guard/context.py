"""What the guard's checkers run against: the complete example campaign and
the inputs its consumers read (traffic files, a corpus in a bundle, matrix
files, gate trials, recorded scheduler outputs), built once per session."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from contracts.campaign import Campaign
from contracts.envelope import ArtifactRef
from services.runtime.bundle import BundleStore
from services.trainer_proxy.plan import PlanInputs, PlanPaths

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "infra/examples/campaign.yaml"
TRAFFIC = ROOT / "infra/examples/sample-traffic.jsonl"
SCHEDULER_OUTPUTS = ROOT / "tests/unit/shared/capacity/fixtures"
RUN = "toy-20261130-010101-abcdef"
SHA = "a" * 64
PATHS = PlanPaths(
    run_dir=f"/bundles/{RUN}",
    cwd="/srv/specdec",
    corpus=f"/bundles/{RUN}/corpus/CORPUS.jsonl",
    corpus_train=f"/bundles/{RUN}/training/corpus-train.jsonl",
    corpus_heldout=f"/bundles/{RUN}/training/corpus-heldout.jsonl",
)


def ref(path: str) -> ArtifactRef:
    return ArtifactRef(uri=f"bundle://{RUN}/{path}", sha256=SHA, size_bytes=10)


INPUTS = PlanInputs(
    corpus=ref("corpus/CORPUS.jsonl"), corpus_train=ref("training/corpus-train.jsonl"),
    corpus_heldout=ref("training/corpus-heldout.jsonl"), train_records=6, heldout_records=2, rejected_lines=0,
)


@dataclass
class Ctx:
    tmp: Path
    traffic_other: Path  # a different traffic file (a part of the sample)
    traffic_dirty: Path  # the sample with 3 % malformed lines
    matrix_a: Path  # the example's matrix as a file
    matrix_b: Path  # the same with one more concurrency level on every cell
    job_template: Path  # an operator's Kubernetes Job template
    pod_template: Path  # an operator's Kubernetes Pod template for the bench servers
    profile: bytes  # PROFILE.json of the sample traffic
    bundle: BundleStore  # holds RUN's corpus (the bench's prompts come from its heldout split)
    gate_baseline: list[Any]
    gate_candidates: dict[str, list[Any]]
    counter: int = 0

    def fresh_bundle(self) -> BundleStore:
        self.counter += 1
        return BundleStore(self.tmp / f"bundle-{self.counter}", fsync=False)


def example() -> dict[str, Any]:
    return copy.deepcopy(_EXAMPLE)


_EXAMPLE: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())


def build_context(tmp: Path) -> Ctx:
    from services.corpus.build import build_corpus
    from services.profiler.profile import profile_traffic
    from tests.unit.gate.test_gate_decide import arm

    lines = TRAFFIC.read_text().splitlines()
    other = tmp / "traffic-other.jsonl"
    other.write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    dirty = tmp / "traffic-dirty.jsonl"
    dirty.write_text("\n".join(lines + ["{not json"] * (len(lines) * 3 // 100)) + "\n")
    matrix = _EXAMPLE["matrix"]
    matrix_a, matrix_b = tmp / "matrix-a.yaml", tmp / "matrix-b.yaml"
    matrix_a.write_text(yaml.safe_dump(matrix))
    wider = copy.deepcopy(matrix)
    for cell in wider["cells"]:
        cell["concurrency"] = [*cell["concurrency"], 8]
    matrix_b.write_text(yaml.safe_dump(wider))
    template = tmp / "job.yaml"
    template.write_text("apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n"
                        "      containers: [{name: main, image: registry/operator:2}]\n")
    pod_template = tmp / "pod.yaml"
    pod_template.write_text("apiVersion: v1\nkind: Pod\nspec:\n  serviceAccountName: bench\n"
                            "  containers: [{name: vllm, image: registry/vllm:ops}]\n")
    profile_path = tmp / "PROFILE.json"
    profile_path.write_text(profile_traffic(TRAFFIC, reject_threshold=0.05).model_dump_json())
    corpus = tmp / "CORPUS.jsonl"
    build_corpus(profile_path, TRAFFIC, corpus, tokenizer_dir=None, size=None, heldout_share=0.1, seed=0, max_model_len=512)
    bundle = BundleStore(tmp / "bundles", fsync=False)
    bundle.write_bytes(RUN, "corpus/CORPUS.jsonl", corpus.read_bytes())
    return Ctx(
        tmp=tmp, traffic_other=other, traffic_dirty=dirty, matrix_a=matrix_a, matrix_b=matrix_b,
        job_template=template, pod_template=pod_template, profile=profile_path.read_bytes(), bundle=bundle,
        gate_baseline=arm(1, "standing"), gate_candidates={"ngram-k3": arm(2, "ngram-k3", factor=0.7)},
    )


def campaign_of(data: dict[str, Any]) -> Campaign:
    return Campaign.model_validate(data)
