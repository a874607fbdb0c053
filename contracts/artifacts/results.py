"""Trial results, version 1: what specdec adds to vLLM's result JSON, and how a step reads one.

A trial result is the JSON that `vllm bench serve --save-result` writes (with or
without the `--save-detailed` arrays), keys and units unchanged (summary
latencies in ms, the `--save-detailed` arrays in seconds). specdec's
bench-runner adds three top-level keys that vLLM never writes:

| key | model | holds |
| --- | --- | --- |
| `identity` | `TrialIdentity` | what was measured: model, hardware, serving config, workload, concurrency, ... |
| `spec_decode` | `contracts.events.SpecDecodeDelta` | the window's deltas of the engine's spec-decode counters |
| `evaluation` | `Evaluation` | accuracy or agreement of the cell's outputs (optional) |

(vLLM itself writes `spec_decode_acceptance_rate` in percent and friends when
it finds the counters; `spec_decode` is specdec's own block, a rate in [0, 1].)
A builtin trial also carries `loadgen_cpu` (`LoadgenCpu`: the load generator's
own CPU seconds over the window), evidence that no figure reads.

The bench-runner writes with `attach_blocks`; the gate and the publisher read
with `parse_trial` (which calls `read_blocks`), so both read the same figures
from the same keys. A plain vLLM file has none of the keys and is still a valid
trial result: readers then list the identity they could not check.

Reading a whole trial (its request figures and one number per metric) is
`contracts/artifacts/trials.py`.

Only the keys named here are read: anything else in a file (training loss,
metadata, labels) never reaches a decision or a report. Pure: the caller reads
the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import Field, model_validator

from contracts.campaign import ServingConfig
from contracts.envelope import Key, Strict
from contracts.events import SpecDecodeDelta

RESULTS_VERSION: Final = 1

# More failed requests than this share (per arm and level, over its trials)
# make the level inconclusive: latencies are measured on the requests that
# succeeded, so failures can hide exactly the slow requests.
MAX_FAILED_SHARE = 0.01

# Identity fields that must be equal between the two arms of a comparison: a
# difference in any of them confounds the speculative config with something
# else. serving_config is the one part allowed to differ (it carries the
# speculation under test); cell_id, role, baseline_cell_id, trial and
# trial_count name the measurement, they do not describe it. `node` is not in
# the tuple: the gate checks it over every trial of both arms at once and names
# each node with its trials (services/gate/checks.py, node_problems), and a file
# written before the node entered the identity leaves it unchecked, not different.
COMPARED_IDENTITY_FIELDS: tuple[str, ...] = (
    "model",
    "hardware",
    "quantization",
    "parallelism",
    "workload_shape",
    "concurrency",
    "regime",
    "graph_mode",
    "source_revision",
)


class Parallelism(Strict):
    """How the served model was split across devices."""

    tensor_parallel_size: int = Field(default=1, ge=1, description="--tensor-parallel-size the server ran with.")
    pipeline_parallel_size: int = Field(default=1, ge=1, description="--pipeline-parallel-size the server ran with.")
    data_parallel_size: int = Field(default=1, ge=1, description="--data-parallel-size the server ran with.")


class TrialIdentity(Strict):
    """What one trial measured; every reported number carries it (README.md, "Evidence")."""

    version: Literal[1] = Field(default=RESULTS_VERSION, description="Version of this identity block.")
    model: str = Field(min_length=1, description="The served (target) model as launched: path or name.")
    hardware: str = Field(min_length=1, description="Hardware label of the node that served, e.g. cpu or h100.")
    quantization: str | None = Field(description="--quantization the server ran with; None for none.")
    parallelism: Parallelism = Field(description="Parallel sizes the server ran with.")
    serving_config: ServingConfig = Field(
        description="The cell's typed serving config as launched, speculative config included "
        "('{training.output}' already resolved to the checkpoint)."
    )
    workload_shape: str = Field(min_length=1, description="Workload shape name the prompts came from.")
    concurrency: int = Field(ge=1, description="Maximum concurrency of the measured load (vLLM's max_concurrency).")
    regime: Literal["warm", "cold", "warm-interleaved"] = Field(
        description="warm: one server per cell, its trials back to back; cold: a fresh server per trial; "
        "warm-interleaved: every cell's server up at once, the trials rotated across the cells in blocks."
    )
    graph_mode: Literal["eager", "graph"] = Field(description="eager when the server ran with --enforce-eager.")
    source_revision: str | None = Field(description="Revision of the serving stack; None when unknown.")
    trial: int = Field(ge=0, description="Trial index within the cell and concurrency level, from 0.")
    trial_count: int = Field(ge=1, description="Trials the plan declared for this cell and concurrency level.")
    cell_id: Key = Field(description="The cell measured.")
    role: Literal["standing", "candidate"] = Field(description="standing (the baseline) or candidate.")
    baseline_cell_id: Key | None = Field(
        description="The standing cell this candidate is compared with; None for the standing cell itself."
    )
    node: str | None = Field(
        default=None,
        description="The node the trial was served on (the bench plan's node for the cell; this host's name on the "
        "local executor). The gate compares it across every trial of a comparison; None in files written before it.",
    )

    @model_validator(mode="after")
    def _check_consistent(self) -> TrialIdentity:
        # The top-level fields restate parts of serving_config so that identity
        # can be compared field by field; they must not contradict it.
        serving = self.serving_config
        if serving.quantization != self.quantization:
            raise ValueError(
                f"quantization {self.quantization!r} disagrees with serving_config {serving.quantization!r}"
            )
        if serving.graph_mode != self.graph_mode:
            raise ValueError(f"graph_mode {self.graph_mode!r} disagrees with serving_config {serving.graph_mode!r}")
        if serving.tensor_parallel_size != self.parallelism.tensor_parallel_size:
            raise ValueError("parallelism.tensor_parallel_size disagrees with serving_config.tensor_parallel_size")
        if self.trial >= self.trial_count:
            raise ValueError(f"trial index {self.trial} is not below trial_count {self.trial_count}")
        if self.role == "standing" and self.baseline_cell_id is not None:
            raise ValueError("the standing cell has no baseline_cell_id")
        if self.role == "candidate" and self.baseline_cell_id is None:
            raise ValueError("a candidate names the standing cell it is compared with in baseline_cell_id")
        return self

    def compared(self) -> dict[str, Any]:
        """The fields that must match between the arms, as plain values."""
        return {name: _plain(getattr(self, name)) for name in COMPARED_IDENTITY_FIELDS}


class Evaluation(Strict):
    """Accuracy of a cell's outputs, from the operator's eval or specdec's agreement check."""

    accuracy: float | None = Field(
        default=None, ge=0, le=1, description="Task accuracy in [0, 1] from the eval command."
    )
    agreement_rate: float | None = Field(
        default=None, ge=0, le=1, description="Share of outputs identical to the standing cell's (builtin eval)."
    )
    samples: int | None = Field(default=None, ge=0, description="Samples the figure was computed on.")

    @model_validator(mode="after")
    def _check_some(self) -> Evaluation:
        if self.accuracy is None and self.agreement_rate is None:
            raise ValueError("an evaluation block carries accuracy or agreement_rate")
        return self

    @property
    def score(self) -> float:
        """The figure an accuracy floor reads: accuracy when measured, else agreement."""
        return self.accuracy if self.accuracy is not None else self.agreement_rate  # type: ignore[return-value]  # _check_some: one is set


class TrialResultBlocks(Strict):
    """specdec's blocks of one trial result, under their top-level keys."""

    identity: TrialIdentity | None = Field(default=None, description="What was measured; None in a plain vLLM file.")
    spec_decode: SpecDecodeDelta | None = Field(
        default=None, description="Spec-decode counter deltas over the window; None without speculation counters."
    )
    evaluation: Evaluation | None = Field(default=None, description="Accuracy or agreement; None when not evaluated.")


SPECDEC_KEYS: tuple[str, ...] = tuple(TrialResultBlocks.model_fields)

# A top-level key of a builtin trial's result, beside the other facts about the window that
# vLLM has no key for (failures_by_kind, total_chunks): how much CPU the load generator itself
# used. Not a block: no gate or report figure reads it; it is evidence for telling a CPU-starved
# client from a slow server.
LOADGEN_CPU_KEY = "loadgen_cpu"


class LoadgenCpu(Strict):
    """The builtin load generator's own CPU use over one window (its measurement process)."""

    user_s: float = Field(ge=0, description="User CPU seconds of the measurement process over the window's run "
                          "(warm-up, both /metrics scrapes and the measured requests).")
    sys_s: float = Field(ge=0, description="System CPU seconds of the measurement process over the same span.")
    wall_s: float = Field(ge=0, description="Wall seconds of the same span: (user_s + sys_s) / wall_s near 1 means "
                          "the client was CPU-bound.")
    cpus: list[int] | None = Field(
        default=None, description="CPUs the process was pinned to (every allowed CPU but 0, where a local vLLM "
        "engine binds its worker); None when it was not pinned (one CPU, not Linux, or a server not on this host).")


def read_blocks(result: Mapping[str, Any]) -> TrialResultBlocks:
    """specdec's blocks of a trial result; absent keys read as None.

    Raises pydantic.ValidationError when a block is present but malformed.
    """
    return TrialResultBlocks.model_validate({key: result[key] for key in SPECDEC_KEYS if result.get(key) is not None})


def attach_blocks(result: Mapping[str, Any], blocks: TrialResultBlocks) -> dict[str, Any]:
    """A copy of vLLM's result with specdec's blocks added; refuses to overwrite different ones."""
    merged = dict(result)
    for key, value in blocks.model_dump(mode="json").items():
        if value is None:
            continue
        if key in merged and merged[key] != value:
            raise ValueError(f"result already holds a different {key!r} block; a trial result is written once")
        merged[key] = value
    return merged


def _plain(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, Strict) else value
