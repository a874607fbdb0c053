"""The bench plan's model: `BenchPlan` and its parts (the cells, the server launches,
the blocks and the rounds), stored in the bundle, hashed, executed only once approved.

Types and their checks only: builder.py builds a plan, staging.py stores it, the
executors read it, and the model imports none of them (the builder imports the
executors' renderers, so an executor importing the model makes no cycle).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from contracts.campaign import LoadSpec
from contracts.envelope import Key, RunId, Strict
from services.runtime.processes import workload_env

PLAN_VERSION: Final = 1
# The regime whose cells run in the plan's blocks (services/bench/planning/interleave.py).
INTERLEAVED = "warm-interleaved"


class SlurmServe(Strict):
    """One server start as a Slurm batch job: everything that is submitted, verbatim."""

    job_name: str = Field(description="--job-name: specdec-<run_id>, half of the label cleanup selects by.")
    comment: str = Field(description="--comment: experiment=<run_id>, the other half of the label.")
    node: str = Field(description="--nodelist: the node the plan serves the cell on.")
    job_script: str = Field(description="The batch script (Python that fills the port and execs the argv; no shell).")
    job_script_path: str = Field(description="Bundle path the script is written to before submission.")
    sbatch_argv: list[str] = Field(description="The exact sbatch argv (its last item is the endpoint file's path).")
    log_path: str = Field(description="Bundle path of the server's stdout and stderr (--output and --error).")
    endpoint_path: str = Field(description="Bundle path of the endpoint file the job writes: host, port, argv, job ID.")
    status_argv: list[str] = Field(description="How the job is watched; {job_id} is sbatch's answer.")
    cancel_argv: list[str] = Field(description="How the job is stopped after its results are captured.")


class KubernetesServe(Strict):
    """One server start as a Kubernetes Pod: the manifest and every kubectl argv, verbatim."""

    namespace: str = Field(description="Namespace of the Pod (capacity.selectors.namespace, else default).")
    pod_name: str = Field(description="The Pod's name: DNS-1123, unique per run and launch.")
    node: str = Field(description="The node the Pod is pinned to (nodeSelector kubernetes.io/hostname).")
    manifest: dict[str, Any] = Field(description="The Pod manifest, labelled experiment=<run_id>.")
    manifest_path: str = Field(description="Bundle path the manifest is written to before kubectl applies it.")
    log_path: str = Field(description="Bundle path the server's log (kubectl logs) is captured to before deletion.")
    apply_argv: list[str] = Field(description="kubectl argv that creates the Pod.")
    wait_argv: list[str] = Field(description="kubectl argv that waits for the Pod to be Ready (readiness deadline).")
    port_forward_argv: list[str] = Field(
        description="kubectl argv that reaches the server; {local_port} is picked at launch."
    )
    logs_argv: list[str] = Field(description="kubectl argv whose output becomes the server log.")
    delete_argv: list[str] = Field(description="kubectl argv that deletes this Pod after its results are captured.")
    cleanup_argv: list[str] = Field(description="kubectl argv that deletes every bench Pod of the run, by label only.")


class CellPlan(Strict):
    """One cell: its identity, the exact serve argv (port chosen at launch), bench and eval."""

    cell_id: Key = Field(description="The cell.")
    role: Literal["standing", "candidate"] = Field(description="standing (the baseline) or candidate.")
    regime: Literal["warm", "cold", "warm-interleaved"] = Field(
        description="warm: one server for all trials; cold: one per trial; warm-interleaved: one server for all "
        "trials, up beside every other cell's, its trials measured in the plan's blocks.")
    trials: int = Field(ge=1, description="Trials per concurrency level.")
    concurrency: list[int] = Field(min_length=1, description="Concurrency levels, one measured window each.")
    node: str = Field(description="Node the cell is served on.")
    identity: dict[str, Any] = Field(description="Identity fields every number of this cell carries.")
    speculative_config: dict[str, Any] | None = Field(description="The --speculative-config the cell declares.")
    serve_argv: list[str] = Field(description="The argv that serves the cell; '{port}' is filled at launch.")
    serve_source: Literal["builtin", "operator"] = Field(
        description="Whether specdec built serve_argv or the operator did."
    )
    bench: Literal["builtin"] | list[str] = Field(description="'builtin' load generator, or the operator's bench argv.")
    eval: Literal["builtin"] | list[str] = Field(
        description="'builtin' agreement with the standing cell, or the operator's eval argv."
    )
    declared_serve_argv: list[str] | None = Field(
        default=None, description="The operator's serve command exactly as declared (a canonical matrix file), "
        "beside the argv launched; absent otherwise.")
    launch_changes: list[dict[str, Any]] | None = Field(
        default=None, description="Each token of the operator's serve command launched other than declared: position, "
        "declared -> launched, and why (docs/bench-runner.md, \"Exact operator commands\"); absent when none.")
    declared_engine_args: dict[str, Any] | None = Field(
        default=None, description="Every argument the operator's `vllm serve` command sets, as vLLM's own parser read "
        "it (a canonical matrix file): the engine read-back checks prefix caching, max_num_batched_tokens and the "
        "kv-cache dtype against it; absent for a cell declared in specdec's keys.")
    unchecked_labels: dict[str, str] | None = Field(
        default=None, description="A canonical cell's identity labels its serve command leaves to vLLM or to a "
        "checkpoint submit could not read (label -> why): not compared before the run; the engine read-back states "
        "what the server runs. Absent when every label was checked.")
    quant_label: str | None = Field(
        default=None, description="A canonical cell's `quant` identity label as given ('none' for none or left out): "
        "where its serve command sets no --quantization, the engine read-back holds the quantization the server runs "
        "to it. Absent for a cell declared in specdec's keys.")
    env: list[str] | None = Field(
        default=None, description="The cell's env: names of the variables its server and the operator's bench and eval "
        "commands get from the bench-runner's environment at launch (values never written here); nothing else of "
        "that environment passes but the platform's (services/runtime/processes/workload_env.py). Absent when none.")

    def workload_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment the cell's server and its bench and eval commands start with (its declared names)."""
        return workload_env.environment(self.env or [], where=f"matrix cell {self.cell_id} env", extra=extra)

    @model_serializer(mode="wrap")
    def _without_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A cell without a declared command serialises (and hashes, and is approved) as before these fields.
        data = handler(self)
        for name in (
            "declared_serve_argv",
            "launch_changes",
            "declared_engine_args",
            "unchecked_labels",
            "quant_label",
            "env",
        ):
            if data.get(name) is None:
                data.pop(name, None)
        return data


class Launch(Strict):
    """One server start, in order."""

    cell_id: Key = Field(description="The cell served.")
    trials: list[int] = Field(
        description="Trials measured on this server (all of them when warm or warm-interleaved, one when cold)."
    )
    slurm: SlurmServe | None = Field(
        default=None, description="Executor slurm: the batch job (sbatch argv, job script) this launch submits.")
    kubernetes: KubernetesServe | None = Field(
        default=None, description="Executor kubernetes: the Pod manifest and the kubectl argv of this launch.")


class Block(Strict):
    """One round of a warm-interleaved plan: trial `index` of every cell that has one, in `order`."""

    index: int = Field(ge=0, description="The block, from 0; also the trial it measures of every cell in it.")
    order: list[Key] = Field(
        min_length=1,
        description="Cell IDs in the order they are measured in this block (each cell's concurrency levels in "
        "order inside its turn): a permutation of the cells with more than `index` trials, shuffled by a "
        "generator seeded from the run ID.")


class LevelNoise(Strict):
    """What earlier runs of the same target and hardware say about one concurrency level's noise."""

    concurrency: int = Field(description="The concurrency level.")
    trials: int = Field(ge=0, description="Earlier trials the spread comes from (0: none recorded).")
    runs: list[str] = Field(description="The earlier runs they come from.")
    cv_pct: float | None = Field(
        description="Per-trial spread of the objective (sd of its logs, as %); null when none."
    )
    expected_trials_per_arm: int | None = Field(
        description="Trials per arm expected to resolve the minimum effect at that spread (an interval narrow enough "
        "to show a change beyond it, or none that matters); null when unknown (no earlier trials: round 1, the "
        "pilot, tells) or not expected by the cap.")


class Rounds(Strict):
    """Sequential rounds (campaign gate.max_trials): the trial range per arm and the stopping rule."""

    min_trials: int = Field(ge=2, description="Trials per arm and level every cell runs before the first look.")
    max_trials: int = Field(
        ge=2, description="The cap: the most trials per arm and level, a hard ceiling on server time."
    )
    objective: str = Field(description="The gate's objective, looked at after every round.")
    guards: list[str] = Field(
        description="Guards looked at after every round (one worse beyond the minimum effect settles a level)."
    )
    min_effect_pct: float = Field(description="The gate's minimum effect, %.")
    server_bias_pct: float = Field(description="The gate's measured server bias, %.")
    alpha_per_side: float = Field(
        description="Each candidate's one-sided alpha (95 % family-wise, Bonferroni over the candidates)."
    )
    rule: str = Field(description="The stopping rule, in words.")
    noise: list[LevelNoise] = Field(
        description="Per level: the noise of earlier runs and the trials per arm it implies."
    )


class BenchPlan(Strict):
    """Everything the bench step would do; its sha256 is what an approval names."""

    version: Literal[1] = Field(default=PLAN_VERSION, description="Plan format version.")
    run_id: RunId = Field(description="The run; also the experiment label of every process started.")
    executor: Literal["local", "slurm", "kubernetes"] = Field(description="Where servers run.")
    cells: list[CellPlan] = Field(min_length=1, description="Every cell, standing first.")
    launches: list[Launch] = Field(
        description="Server starts in order (cold regimes interleave cells across trials; warm-interleaved servers "
        "are all started, in this order, before the first block).")
    blocks: list[Block] | None = Field(
        default=None,
        description="warm-interleaved plans only: the order the trials run in, block b measuring trial b of each "
        "cell in `order` on the servers kept up; absent from other plans.")
    load: LoadSpec = Field(description="The measured load, the same for every cell.")
    prompts: dict[str, Any] = Field(
        description="Where prompts come from: corpus heldout split (uri, sha256) or shapes."
    )
    warmup: str = Field(description="What runs before each measured window, in words.")
    deployment_changes: list[str] = Field(description="Every change to the cluster the plan makes.")
    cleanup: list[str] = Field(description="What cleanup does, selected by the experiment label only.")
    draft: bool = Field(description="True for an exploratory matrix (matrix.exploratory): every result is DRAFT.")
    readiness_timeout_s: float = Field(description="How long a server may take to answer /health.")
    rounds: Rounds | None = Field(
        default=None,
        description="Sequential rounds (gate.max_trials): every cell runs `trials` (the minimum), then one more "
        "trial per arm and level each block until the stopping rule says every level is decided, or "
        "`rounds.max_trials`; the blocks and launches cover the cap. Absent from a fixed-trial plan.")

    @model_validator(mode="after")
    def _check_blocks(self) -> BenchPlan:
        # Read back before execution: a warm-interleaved plan without its order would start every
        # server and measure nothing.
        if any(cell.regime == INTERLEAVED for cell in self.cells) != (self.blocks is not None):
            raise ValueError("a bench plan records `blocks` exactly when its cells are warm-interleaved; "
                             "re-plan the bench step (specdec request bench RUN_ID)")
        return self

    @model_serializer(mode="wrap")
    def _without_absent_blocks(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A plan without warm-interleaved cells serialises (and hashes, and is approved) byte for
        # byte as before `blocks` existed.
        data = handler(self)
        for name in ("blocks", "rounds"):  # a fixed-trial plan hashes as before `rounds` existed too
            if data.get(name) is None:
                data.pop(name, None)
        return data

    @property
    def cap(self) -> int | None:
        """The most trials per arm and level the plan may run (sequential rounds); None for fixed trials."""
        return self.rounds.max_trials if self.rounds is not None else None
