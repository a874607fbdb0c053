"""The campaign workflow's canonical matrix file, accepted as written (docs/configuration.md, "The canonical shape").

The workflow's toolchain describes a serving comparison as one YAML file: top-level
`name`, `description`, `experiment_id`, `family`, `evidence_bundle_path`,
`provenance`, `campaign.comparator_baseline`, and `cells`, each with its identity
fields and a `vllm_sweep` block holding the operator's exact `serve_cmd` and
`bench_cmd`. specdec reads that file as it is: the same file carries specdec's own
keys for what the workflow supplies in its other steps (target, traffic, capacity,
gate, commands.train, ...). A file is in the canonical shape when it has top-level
`cells` (specdec's own shape has `matrix`).

Every key is consumed or refused by name: the identity and notes go into the
bundle and the report; the commands are read with vLLM's own parsers at submit
(services/app/campaign/canonical.py) and become the cells' declared config; keys the
toolchain knows but specdec cannot honour (`helm_overrides`, `profile`, another
`backend`) are refused with the reason. No I/O here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from contracts.campaign.commands import DeclaredEnv, env_field
from contracts.envelope import Key, Strict

# Keys of the workflow's toolchain that specdec refuses, with why (a key nobody reads is never accepted).
REFUSED_KEYS: dict[str, str] = {
    "helm_overrides": "specdec launches each cell's serve_cmd itself (no Helm release is deployed or changed); "
                      "put the serving flags in serve_cmd",
    "profile": "specdec profiles the campaign's own traffic (its profile step); a cell cannot bring another profile",
}
BACKEND = "vllm-sweep"
# specdec's own keys that a canonical file may carry beside the workflow's (what the workflow supplies in its
# other steps). Matrix-level settings live under `load` and `exploratory` since the file has no `matrix`.
SPECDEC_KEYS = ("version", "target", "standing", "traffic", "corpus", "commands", "capacity", "gate", "publish",
                "review", "acknowledgements", "source_revisions", "load", "exploratory")


def _refuse_known(data: Any, where: str) -> Any:
    if isinstance(data, dict):
        found = [f"{where}{key}: {why}" for key, why in REFUSED_KEYS.items() if key in data]
        if found:
            raise ValueError("; ".join(found))
    return data


class VllmSweepCommands(Strict):
    """The operator's exact commands for one cell."""

    serve_cmd: str | list[str] = Field(
        description="The operator's serve command, exactly as their cluster runs it: a string (split as a shell splits "
        "words, never run through one) or a list. `vllm serve ...` is read with vLLM's own parser; another command "
        "needs the cell's `serving` keys. Only whitelisted {placeholders} are placeholders; every other brace is "
        "literal.")
    bench_cmd: str | list[str] | None = Field(
        default=None,
        description="The operator's bench command (`vllm bench serve ...`); absent: specdec's own load generator "
        "drives every cell with the file's `load`.")


class CanonicalCell(Strict):
    """One cell of the canonical matrix: its identity and the operator's commands."""

    cell_id: Key = Field(description="The cell's ID; a path component of the bundle.")
    id: Key | None = Field(default=None, description="The toolchain's second name for the cell; must equal cell_id.")
    backend: Literal["vllm-sweep"] = Field(description="How the cell is run; specdec runs vllm-sweep cells only.")
    concurrencies: list[int] = Field(min_length=1, description="Concurrency levels measured, one window each.")
    notes: str | None = Field(default=None, description="Free text, kept in the bundle and shown in the report.")
    model: str | None = Field(default=None, description="Model identity label; checked against the served model.")
    hardware: str = Field(default="cpu", description="Hardware label (identity).")
    quant: str | None = Field(default=None, description="Quantization label; checked against the serve command's.")
    tensor_parallel: int | None = Field(default=None, ge=1, description="Tensor-parallel size label; checked "
                                        "against the serve command's.")
    parallel_strategy: str | None = Field(default=None, description="Parallelism label (identity), e.g. 'tp'.")
    max_num_batched_tokens: int | None = Field(default=None, ge=1, description="Label; checked against the serve "
                                               "command's --max-num-batched-tokens.")
    extras: dict[str, Any] = Field(default_factory=dict, description="More identity labels, kept in the bundle and "
                                   "the report as given.")
    vllm_sweep: VllmSweepCommands = Field(description="The operator's exact serve and bench commands.")
    # specdec's own per-cell keys (docs/configuration.md): optional, as in specdec's shape.
    regime: Literal["warm", "cold", "warm-interleaved"] = Field(default="warm", description="As matrix.cells[].regime.")
    trials: int = Field(default=3, ge=1, description="Trials per concurrency level.")
    node: str | None = Field(default=None, description="Node to serve on; the capacity step's choice when unset.")
    source_revision: str | None = Field(default=None, description="Serving stack revision (identity).")
    env: DeclaredEnv = env_field("this cell's server and bench command (as matrix.cells[].env)")
    serving: dict[str, Any] | None = Field(
        default=None,
        description="The declared serving config in specdec's own keys (matrix.cells[].serving). Required for a "
        "serve command that is not `vllm serve` (a wrapper cannot be parsed); refused beside a `vllm serve` command, "
        "whose declared config is what vLLM reads from it.")

    @model_validator(mode="before")
    @classmethod
    def _refused(cls, data: Any) -> Any:
        return _refuse_known(data, "cells[].")

    @model_validator(mode="after")
    def _check_id(self) -> CanonicalCell:
        if self.id is not None and self.id != self.cell_id:
            raise ValueError(f"cell {self.cell_id!r} has id {self.id!r}: id must equal cell_id (or be left out)")
        return self


class CampaignBlock(Strict):
    """The toolchain's campaign-wide settings."""

    comparator_baseline: str | None = Field(
        default=None,
        description="cell_id of the baseline every candidate is compared with (the standing config). Empty: the "
        "previous cell, which specdec reads as the first cell when there are two cells and refuses otherwise "
        "(specdec compares every candidate with one baseline).")


class CanonicalFile(Strict):
    """The workflow's canonical matrix file, with specdec's keys for the workflow's other steps."""

    name: str = Field(min_length=1, description="The campaign's name, kept in the bundle and the report.")
    description: str | None = Field(default=None, description="Free text, kept in the bundle and the report.")
    experiment_id: str | None = Field(default=None, description="The run ID; must be the run it is submitted into.")
    family: str = Field(description="Model family label (as specdec's `family`).")
    evidence_bundle_path: str | None = Field(default=None, description="The run's bundle folder; must be the run's "
                                             "folder under the services' bundle root.")
    provenance: dict[str, Any] = Field(default_factory=dict, description="Where the file and its commands come from; "
                                       "kept in the bundle and the report as given.")
    campaign: CampaignBlock = Field(default_factory=CampaignBlock, description="Campaign-wide settings.")
    cells: list[CanonicalCell] = Field(min_length=2, description="The standing cell and one or more candidates.")
    specdec: dict[str, Any] = Field(default_factory=dict, description="specdec's own keys (SPECDEC_KEYS), "
                                    "gathered from the top level of the file.")

    @model_validator(mode="before")
    @classmethod
    def _gather(cls, data: Any) -> Any:
        data = _refuse_known(data, "")
        if not isinstance(data, dict):
            return data
        data = dict(data)
        data["specdec"] = {key: data.pop(key) for key in SPECDEC_KEYS if key in data}
        if "matrix" in data:
            raise ValueError("matrix: a canonical file gives its cells at the top level (`cells:`); specdec's own "
                             "shape has `matrix` instead: use one shape or the other")
        return data


def is_canonical(data: Any) -> bool:
    """True for a file in the workflow's canonical shape (top-level `cells`)."""
    return isinstance(data, dict) and "cells" in data


# --- what submit records of a canonical file (the bundle's canonical.json) -------------------------


class Rewrite(Strict):
    """One token of an operator's command that specdec launches changed."""

    position: int = Field(description="Index of the token in the declared argv (the appended ones: its length).")
    declared: str | None = Field(description="The operator's token; None for a token specdec appended.")
    launched: str = Field(description="What is launched instead ({placeholders} filled at launch).")
    why: str = Field(description="Why specdec must change it.")


class CanonicalCellRecord(Strict):
    """One canonical cell as specdec read it."""

    cell_id: str = Field(description="The cell.")
    role: str = Field(description="standing (the comparator baseline) or candidate.")
    notes: str | None = Field(description="The operator's notes.")
    identity: dict[str, Any] = Field(description="The identity labels as given (model, hardware, quant, "
                                     "tensor_parallel, parallel_strategy, max_num_batched_tokens, extras).")
    serve_cmd: list[str] = Field(description="The operator's serve argv, as declared.")
    parsed_by_vllm: bool = Field(description="True when vLLM's own serve parser read the command.")
    engine_args: dict[str, Any] = Field(description="Every argument the serve command sets, as vLLM's parser read "
                                        "it; empty for a command vLLM's parser cannot read.")
    rewrites: list[Rewrite] = Field(description="Each token launched other than declared, and why.")
    bench_cmd: list[str] | None = Field(default=None, description="The operator's bench argv, as declared; None: "
                                        "specdec's load generator.")
    bench_args: dict[str, Any] = Field(default_factory=dict, description="Every argument the bench command sets, as "
                                       "vLLM's bench parser read it.")
    bench_rewrites: list[Rewrite] = Field(default_factory=list, description="Each token of the bench command run "
                                          "other than declared, and why.")
    unchecked_labels: dict[str, str] = Field(
        default_factory=dict, description="Identity labels the serve command leaves to vLLM or to a checkpoint that "
        "was not here to read, so submit could not compare them (label -> why): the engine read-back states what "
        "the server runs (docs/configuration.md, \"Identity labels\"). Empty when every label was checked.")
    bench_dataset: str | None = Field(default=None, description="What the operator's bench draws its prompts from "
                                      "(its --dataset-name and settings), the cell's workload shape; None: specdec's "
                                      "prompts (the corpus's heldout split or the named shapes).")


class CanonicalRecord(Strict):
    """What a canonical file said beyond specdec's campaign: stored in the bundle as canonical.json."""

    version: int = Field(default=1, description="Record format version.")
    name: str = Field(description="The campaign's name.")
    description: str | None = Field(description="The campaign's description.")
    experiment_id: str | None = Field(description="The experiment ID the file names.")
    evidence_bundle_path: str | None = Field(description="The bundle folder the file names.")
    provenance: dict[str, Any] = Field(description="The file's provenance, as given.")
    comparator_baseline: str = Field(description="The baseline cell every candidate is compared with.")
    cells: list[CanonicalCellRecord] = Field(description="Every cell, in the file's order.")
