"""The command variants every campaign field is checked under.

Four axes decide which code consumes a field: who builds the serve command
(specdec's builtin vLLM argv, or the operator's template), who drives the load
(specdec's builtin load generator, or the operator's bench template), where the
servers and the trainer run (local, Slurm, Kubernetes) and where the prompts
come from (a traffic file: profile, corpus, training, heldout prompts; or named
workload shapes: no corpus, no training, shaped prompts). A field consumed under
one of them may be dropped under another, so each field is checked under every
variant where it applies.

All 2 x 2 x 3 x 2 = 24 combinations are not needed: the consumers meet in
pairs (a serve template inside a Slurm job script or a Pod manifest, a bench
template fed shaped or heldout prompts, a training launch on each executor),
so the six variants below cover every pair of levels of any two axes (a
covering array of strength 2; six rows is the least that covers the 3 x 2
pairs of the executor with any two-level axis). Each row:

    serve     bench     executor    traffic
    builtin   builtin   local       file      (the example campaign as written)
    operator  operator  local       shapes
    builtin   operator  slurm       file
    operator  builtin   slurm       shapes
    builtin   builtin   kubernetes  shapes
    operator  operator  kubernetes  file

A variant is the complete example campaign (infra/examples/campaign.yaml)
with only what that variant needs changed: the operator templates carry every
declared field (so `specdec submit` accepts them), a Kubernetes campaign names
the container image, and a shapes campaign has no trainer and serves a draft
that exists rather than one it would train (and names no trainer revision).
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from typing import Any, Literal

from tests.unit.guard.context import example

Serve = Literal["builtin", "operator"]
Bench = Literal["builtin", "operator"]
Executor = Literal["local", "slurm", "kubernetes"]
Traffic = Literal["file", "shapes"]

# An operator serve template that carries every field a cell can declare (contracts/templates/carriers.py).
SERVE_TEMPLATE = [
    "python", "-m", "vllm.entrypoints.openai.api_server", "--model", "{model}", "--tokenizer", "{tokenizer}",
    "--dtype", "{dtype}", "{quantization_flag}", "--tensor-parallel-size", "{tensor_parallel_size}",
    "{enforce_eager_flag}", "{max_num_seqs_flag}", "--max-model-len", "{max_model_len}", "{speculative_config_flag}",
    "--host", "{host}", "--port", "{port}",
]
# An operator bench template that carries every load field and the plan's prompts.
BENCH_TEMPLATE = [
    "python", "bench.py", "--base-url", "{base_url}", "--model", "{model}", "--tokenizer", "{tokenizer}",
    "--prompts", "{prompts_path}", "--result", "{result_path}", "--endpoint", "{endpoint}",
    "--num-prompts", "{num_prompts}", "--max-concurrency", "{concurrency}", "--num-warmups", "{warmup_requests}",
    "--request-rate", "{request_rate}", "--burstiness", "{burstiness}", "--max-output-tokens", "{max_output_tokens}",
    "{ignore_eos_flag}",
]
IMAGE = "registry.example/vllm:1"
SHAPES = ["short", "medium"]
EXISTING_DRAFT = "/drafts/existing"


@dataclass(frozen=True)
class Variant:
    serve: Serve
    bench: Bench
    executor: Executor
    traffic: Traffic

    @property
    def id(self) -> str:
        return f"{self.serve}-serve,{self.bench}-bench,{self.executor},{self.traffic}"

    def data(self) -> dict[str, Any]:
        """The example campaign as this variant runs it (raw YAML data)."""
        data = example()
        commands = data["commands"]
        if self.serve == "operator":
            commands["serve"] = {"argv": list(SERVE_TEMPLATE)}
        if self.bench == "operator":
            commands["bench"] = {"argv": list(BENCH_TEMPLATE)}
        data["capacity"]["scheduler"] = self.executor
        if self.executor == "kubernetes":
            data["capacity"]["selectors"] = {"image": IMAGE}
        if self.traffic == "shapes":
            data["traffic"] = {"shapes": list(SHAPES)}
            commands.pop("train", None)
            data.pop("corpus", None)
            data["source_revisions"].pop("trainer", None)  # refused with shapes: nothing is trained
            for cell in data["matrix"]["cells"]:
                # The label of the heldout split; a shapes campaign's cells take the default.
                cell.pop("workload_shape", None)
                spec = cell.get("serving", {}).get("speculative")
                if spec and spec.get("model") == "{training.output}":
                    spec["model"] = EXISTING_DRAFT  # nothing is trained without traffic
        return copy.deepcopy(data)

    def matches(self, **axes: Any) -> bool:
        """Every named axis has the value given (a value or a tuple of values)."""
        for axis, wanted in axes.items():
            values = wanted if isinstance(wanted, tuple) else (wanted,)
            if getattr(self, axis) not in values:
                return False
        return True


VARIANTS: tuple[Variant, ...] = (
    Variant("builtin", "builtin", "local", "file"),
    Variant("operator", "operator", "local", "shapes"),
    Variant("builtin", "operator", "slurm", "file"),
    Variant("operator", "builtin", "slurm", "shapes"),
    Variant("builtin", "builtin", "kubernetes", "shapes"),
    Variant("operator", "operator", "kubernetes", "file"),
)
BY_ID = {v.id: v for v in VARIANTS}
AXES: dict[str, tuple[str, ...]] = {
    "serve": ("builtin", "operator"), "bench": ("builtin", "operator"),
    "executor": ("local", "slurm", "kubernetes"), "traffic": ("file", "shapes"),
}


def uncovered_pairs(variants: tuple[Variant, ...] = VARIANTS) -> list[str]:
    """Pairs of levels of two axes that no variant has (empty: the variants are pairwise complete)."""
    missing = []
    for a, b in itertools.combinations(AXES, 2):
        for x, y in itertools.product(AXES[a], AXES[b]):
            if not any(getattr(v, a) == x and getattr(v, b) == y for v in variants):
                missing.append(f"{a}={x} with {b}={y}")
    return missing
