"""The matrix: the cells of the comparison, each a typed serving config, and the measured load."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from contracts.argv import ArgvTemplate
from contracts.campaign.commands import DeclaredEnv, env_field
from contracts.campaign.speculative import SpeculativeConfig
from contracts.envelope import Key, Strict
from contracts.errors import Problems

# Trials per level below which a matrix is exploratory only (a DRAFT): too few for the gate's noise estimate.
MIN_CELL_TRIALS = 3


def nodes_differ(nodes: dict[str, str]) -> str:
    """The refusal of arms served on different nodes (the matrix's named nodes, the plan's resolved ones)."""
    return f"cells differ in node: {nodes}; a controlled comparison runs every cell on one node"


class ServingConfig(Strict):
    """Typed serving config of a cell; every field maps to one vLLM argument."""

    model: str | None = Field(default=None, description="Model served; the campaign target's checkpoint when unset.")
    dtype: str = Field(default="auto", description="--dtype.")
    quantization: str | None = Field(default=None, description="--quantization; None for none.")
    tensor_parallel_size: int = Field(default=1, ge=1, description="--tensor-parallel-size.")
    graph_mode: Literal["eager", "graph"] = Field(default="eager", description="eager adds --enforce-eager.")
    max_num_seqs: int | None = Field(default=None, ge=1, description="--max-num-seqs.")
    speculative: SpeculativeConfig | None = Field(
        default=None, description="--speculative-config; None for no speculation."
    )


class VllmSweep(Strict):
    """Optional operator commands of a cell; without them specdec builds both."""

    serve_cmd: ArgvTemplate | None = Field(default=None, description="Operator serve argv template.")
    bench_cmd: ArgvTemplate | None = Field(default=None, description="Operator bench argv template.")


class Cell(Strict):
    """One arm of the comparison."""

    cell_id: Key = Field(description="Unique cell ID; a path component of the bundle.")
    role: Literal["standing", "candidate"] = Field(description="standing (the baseline) or candidate.")
    hardware: str = Field(default="cpu", description="Hardware label (identity).")
    workload_shape: str | None = Field(
        default=None,
        description="Workload shape label (identity), derived from where the prompts come from when unset: "
        "'corpus-heldout' for traffic, the shape names joined by '+' for shapes; another value is refused.",
    )
    concurrency: list[int] = Field(
        default_factory=lambda: [1], min_length=1, description="Concurrency levels measured."
    )
    regime: Literal["warm", "cold", "warm-interleaved"] = Field(
        default="warm",
        description="warm: one server per cell, its trials back to back, cells one after another; cold: one server "
        "per trial; warm-interleaved: every cell's server up at once, trial b of every cell in block b, the cells "
        "in a seeded random order per block (every cell of the matrix, or none).",
    )
    trials: int = Field(default=3, ge=1, description="Trials per concurrency level.")
    node: str | None = Field(default=None, description="Node to serve on; the capacity step's choice when unset.")
    source_revision: str | None = Field(default=None, description="Serving stack revision (identity).")
    serving: ServingConfig = Field(default_factory=ServingConfig, description="Typed serving config.")
    vllm_sweep: VllmSweep = Field(default_factory=VllmSweep, description="Optional operator serve/bench commands.")
    env: DeclaredEnv = env_field("this cell's server (builtin or the operator's) and the operator's bench and eval "
                                 "commands run against it")


class LoadSpec(Strict):
    """The measured load, identical for every cell (a controlled comparison)."""

    endpoint: Literal["completions", "chat"] = Field(
        default="completions", description="/v1/completions or /v1/chat/completions."
    )
    num_prompts: int = Field(default=32, ge=1, description="Measured requests per trial and concurrency level.")
    warmup_requests: int = Field(
        default=4, ge=0, description="Requests sent before each measured window; excluded from every figure."
    )
    request_rate: float | None = Field(
        default=None, gt=0, description="Requests/s; None sends as fast as the concurrency allows."
    )
    burstiness: float = Field(
        default=1.0, gt=0,
        description="Gamma shape of inter-arrivals: 1 is Poisson, lower is burstier; needs request_rate "
        "(else refused).",
    )
    max_output_tokens: int | None = Field(
        default=None, ge=1, description="Output length cap; None takes each prompt's length from the profile/corpus."
    )
    ignore_eos: bool | None = Field(
        default=None,
        description="Generate exactly each prompt's output length, past the end-of-sequence token. None: true for "
        "shapes (a shape fixes the output length), false for traffic prompts (they end where the model ends them).",
    )
    client_processes: int = Field(
        default=1, ge=1, le=64,
        description="Processes of specdec's builtin load generator that drive each window together, their "
        "per-request records merged into one window on one clock (docs/bench-loadgen.md, \"Several client "
        "processes\"): for servers that stream more chunks per second than one client core receives. Each process "
        "needs a request in flight, so every cell's lowest concurrency level must be at least this; an operator "
        "bench command drives its own load, so more than 1 is refused beside one.",
    )

    @model_validator(mode="after")
    def _check_arrivals(self) -> LoadSpec:
        # Without a rate every request is sent at once: there are no gaps for a gamma shape to shape.
        if self.request_rate is None and self.burstiness != 1.0:
            raise ValueError(
                f"matrix.load.burstiness {self.burstiness:g} needs matrix.load.request_rate: without a rate every "
                "request is sent at once and there are no inter-arrivals to shape; set request_rate (requests/s) "
                "or remove burstiness"
            )
        return self

    def effective_ignore_eos(self, *, shapes: bool) -> bool:
        """What every prompt of the window gets: the operator's value, else the prompt source's default."""
        return effective_ignore_eos(self.ignore_eos, shapes=shapes)


def effective_ignore_eos(value: bool | None, *, shapes: bool) -> bool:
    """`matrix.load.ignore_eos` as it is sent: an explicit value for either prompt source, else true for
    shapes (a shape fixes the output length) and false for traffic's heldout prompts."""
    return shapes if value is None else value


class Matrix(Strict):
    """The cells of the comparison, inline."""

    cells: list[Cell] = Field(min_length=1, description="Cells: one standing, one or more candidates.")
    load: LoadSpec = Field(default_factory=LoadSpec, description="The measured load, the same for every cell.")
    exploratory: bool = Field(
        default=False,
        description="Run as an exploratory DRAFT: fewer than 3 trials per cell are allowed, and the bench results "
        "(bench.completed, the plan), the gate's decision and the report are marked DRAFT, whatever the trial counts.",
    )

    @model_validator(mode="after")
    def _check_cells(self) -> Matrix:
        # Every problem at once (Problems): one would otherwise hide the next until the first is mended.
        problems = []
        ids = [cell.cell_id for cell in self.cells]
        if len(ids) != len(set(ids)):
            problems.append(f"duplicate cell_id in matrix: {sorted({i for i in ids if ids.count(i) > 1})}")
        if sum(cell.role == "standing" for cell in self.cells) != 1:
            problems.append("a matrix needs exactly one standing cell")
        # Interleaving rotates the trials across every cell's server so that drift hits every arm
        # alike; a cell outside the rotation would not share it (and the gate refuses arms whose
        # regimes differ: regime is a compared identity field, contracts/artifacts/results.py).
        interleaved = [cell.cell_id for cell in self.cells if cell.regime == "warm-interleaved"]
        if interleaved and len(interleaved) != len(self.cells):
            others = {cell.cell_id: cell.regime for cell in self.cells if cell.regime != "warm-interleaved"}
            problems.append(
                f"matrix.cells {interleaved} are regime warm-interleaved but {others} are not: warm-interleaved "
                "rotates the trials across every cell's server, so set regime: warm-interleaved on every cell, "
                "or on none"
            )
        # The builtin load generator splits a window's concurrency cap over its client processes;
        # a level below the process count would leave a process with nothing to send.
        low = {cell.cell_id: min(cell.concurrency) for cell in self.cells
               if min(cell.concurrency) < self.load.client_processes}
        if low:
            problems.append(
                f"matrix.load.client_processes {self.load.client_processes} splits each window's concurrency over "
                f"that many client processes, and each needs a request in flight, but cells {low} have a lower "
                "concurrency level: lower client_processes or raise those levels"
            )
        problems += self._comparison_problems()
        if problems:
            raise Problems(problems)
        return self

    def _comparison_problems(self) -> list[str]:
        """What keeps the arms from a controlled comparison, seen in the matrix alone (the bench plan refused
        these only after the upstream steps ran; the nodes it resolves from the capacity step it still checks)."""
        problems = []
        few = {cell.cell_id: cell.trials for cell in self.cells if cell.trials < MIN_CELL_TRIALS}
        if few and not self.exploratory:
            problems.append(f"cells with fewer than {MIN_CELL_TRIALS} trials: {few}; set matrix.exploratory: true "
                            "to run them as a DRAFT")
        modes = {cell.cell_id: cell.serving.graph_mode for cell in self.cells}
        if len({cell.serving.graph_mode for cell in self.cells}) > 1:  # over the cells: two may share an ID
            problems.append(f"cells differ in graph mode: {modes}; a controlled comparison serves every cell in one "
                            "graph mode (serving.graph_mode)")
        named = {cell.cell_id: cell.node for cell in self.cells if cell.node}
        if len({cell.node for cell in self.cells if cell.node}) > 1:
            problems.append(nodes_differ(named))
        return problems

    def for_traffic(self, *, shapes: bool) -> Matrix:
        """This matrix with the load's traffic-dependent default decided (`ignore_eos`), as the bench
        plan carries it: the builtin load generator, an operator bench's placeholders and the
        prompts file then all see one value."""
        if self.load.ignore_eos is not None:
            return self
        load = self.load.model_copy(update={"ignore_eos": self.load.effective_ignore_eos(shapes=shapes)})
        return self.model_copy(update={"load": load})


class MatrixFile(Strict):
    """The matrix as a path to a YAML file of the same form."""

    path: str = Field(min_length=1, description="Path of the matrix YAML file.")
