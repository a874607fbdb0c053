"""The training plan's model: `TrainingPlan` and its parts (the inputs, the probes, and one
launch per executor kind), stored as `training/plan.json`, whose sha256 is what an approval names.

Types and their checks only: builder.py builds a plan, staging.py stores it, and the
executors (`local`, `slurm`) and the capture read it; the model imports none of them.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Annotated, Any, Final, Literal

from pydantic import Field, model_validator

from contracts.artifacts.training import InputKey, ReusedDraft
from contracts.campaign import Scheduler, TrainProgress
from contracts.envelope import ArtifactRef, RunId, Strict

PLAN_VERSION: Final = 1

# The service label (SPECDEC_SERVICE) of a local trainer and its keeper: not the trainer-proxy's
# own, so that a restarted trainer-proxy's reconcile (which ends its own labelled work that no
# lease holds) leaves a trainer it can re-attach to (services/trainer_proxy/execution/detached.py).
DETACHED_SERVICE = "trainer"


class LocalLaunch(Strict):
    """A child process of the trainer-proxy on this machine."""

    kind: Literal["local"] = Field(default="local", description="Executor kind.")
    argv: list[str] = Field(min_length=1, description="The exact argv, exec'd directly (no shell).")
    cwd: str = Field(description="Working directory of the trainer.")
    env_added: dict[str, str] = Field(description="Variables set on the trainer by specdec: the experiment label.")
    env: list[str] = Field(
        default_factory=list,
        description="commands.train.env: names of the variables the trainer and its probe get from the service's "
        "environment at launch; the values are read then, never written here. Nothing else of the service's "
        "environment passes but the platform's (services/runtime/processes/workload_env.py).")
    stdout_path: str = Field(description="Bundle path of the trainer's stdout.")
    stderr_path: str = Field(description="Bundle path of the trainer's stderr.")


class SlurmLaunch(Strict):
    """One batch job whose script execs the trainer's argv (no shell)."""

    kind: Literal["slurm"] = Field(default="slurm", description="Executor kind.")
    argv: list[str] = Field(min_length=1, description="The exact argv the job script execs.")
    cwd: str = Field(description="Working directory of the job (--chdir).")
    job_name: str = Field(description="--job-name: specdec-<run_id>.")
    comment: str = Field(description="--comment: experiment=<run_id>, the label cleanup selects by.")
    job_script: str = Field(description="The batch script: a Python file that execs argv; no shell reads it.")
    job_script_path: str = Field(description="Bundle path the script is written to before submission.")
    sbatch_argv: list[str] = Field(description="The exact sbatch argv.")
    env: list[str] = Field(
        default_factory=list,
        description="commands.train.env: names of the variables the job and the local probe get from the service's "
        "environment at launch; the values are read then, never written here. Nothing else of the service's "
        "environment passes but the platform's (services/runtime/processes/workload_env.py): sbatch runs with that "
        "environment and passes it to the job.")
    status_argv: list[str] = Field(description="How the job is watched; {job_id} is filled at submission.")
    cancel_argv: list[str] = Field(description="How the job is stopped at the timeout; {job_id} as above.")
    stdout_path: str = Field(description="Bundle path of the job's stdout (--output).")
    stderr_path: str = Field(description="Bundle path of the job's stderr (--error).")


class KubernetesLaunch(Strict):
    """A labelled Job; rendered here, applied by the operator (no cluster runs next to specdec's tests)."""

    kind: Literal["kubernetes"] = Field(default="kubernetes", description="Executor kind.")
    argv: list[str] = Field(min_length=1, description="The exact container command (no shell).")
    namespace: str = Field(description="Namespace of the Job.")
    job_name: str = Field(description="metadata.name of the Job.")
    manifest: dict[str, Any] = Field(description="The Job manifest, labelled experiment=<run_id>.")
    manifest_path: str = Field(description="Bundle path the manifest is written to.")
    apply_argv: list[str] = Field(description="The kubectl argv that would create the Job.")
    plan_only: Literal[True] = Field(default=True, description="specdec renders this Job but does not apply it.")
    note: str = Field(description="What the operator does with this plan, in words.")


Launch = Annotated[LocalLaunch | SlurmLaunch | KubernetesLaunch, Field(discriminator="kind")]


class PlanInputs(Strict):
    """The data the trainer sees, pinned by hash."""

    corpus: ArtifactRef = Field(description="CORPUS.jsonl the splits were taken from.")
    corpus_train: ArtifactRef = Field(description="The train split, one corpus record a line ({corpus_train}).")
    corpus_heldout: ArtifactRef = Field(description="The heldout split ({corpus_heldout}); the probes' prompts.")
    train_records: int = Field(ge=1, description="Records in the train split.")
    heldout_records: int = Field(ge=0, description="Records in the heldout split.")
    rejected_lines: int = Field(ge=0, description="Corpus lines without a valid split, left out of both files.")


class ProbePlan(Strict):
    """The capture-correctness probes run on the output after a clean exit."""

    operator_argv: list[str] | None = Field(description="The operator's probe argv (no shell); None when not given.")
    builtin: dict[str, str] = Field(description="Built-in probes by name, in words.")
    prompts: int = Field(ge=1, description="Heldout prompts the forward-pass probe tokenizes.")
    timeout_s: float = Field(gt=0, description="Time limit of each probe.")


class TrainingPlan(Strict):
    """Everything the training step would do; its sha256 is what an approval names."""

    version: Literal[1] = Field(default=PLAN_VERSION, description="Plan format version.")
    run_id: RunId = Field(description="The run; also the experiment label of everything started.")
    executor: Scheduler = Field(description="Where the trainer runs: local, slurm or kubernetes.")
    node: str = Field(description="The node the capacity step selected; the trainer is pinned to it.")
    launch: Launch | None = Field(
        description="How the trainer is started, exactly; None when an earlier run's draft is reused (nothing starts)."
    )
    inputs: PlanInputs = Field(description="The data the trainer sees, with hashes.")
    target: str = Field(description="The target checkpoint ({target}).")
    tokenizer: str = Field(description="The target's tokenizer ({tokenizer}).")
    output_dir: str = Field(
        description="Absolute path the trainer writes to ({output_dir}); every file under it is kept."
    )
    checkpoint_dir: str = Field(
        description="The draft checkpoint: output_dir, or output_dir/<commands.train.checkpoint_subdir>. The probes "
        "and the draft cost read it; it is {training.output} and training.completed's checkpoint_dir."
    )
    expected_outputs: list[str] = Field(description="What the trainer must leave behind, in words.")
    timeout_s: float = Field(gt=0, description="commands.train.timeout_s: past it the trainer's group is killed.")
    kill_grace_s: float = Field(gt=0, description="Seconds between SIGTERM and SIGKILL when stopping the trainer.")
    probes: ProbePlan | None = Field(
        description="Probes run on the output; None when reused (they passed on the source)."
    )
    stop_conditions: list[str] = Field(description="Every condition that stops the campaign with training.failed.")
    preflight: str = Field(description="What is checked right before launch.")
    deployment_changes: list[str] = Field(description="Every change to the cluster the plan makes.")
    cleanup: list[str] = Field(description="What cleanup does and when; selection by the experiment label only.")
    input_key: InputKey | None = Field(
        description="The training input key and what it covers; None when it cannot be computed."
    )
    reuse_enabled: bool = Field(description="commands.train.reuse: whether an earlier identical draft may be reused.")
    reuse: ReusedDraft | None = Field(
        description="The earlier run's draft this plan copies instead of training; None: it trains."
    )
    reuse_note: str = Field(description="Why the draft is or is not reused, in words.")
    progress: TrainProgress | None = Field(
        default=None,
        description="commands.train.progress: how the trainer's output lines are read as progress (relayed as "
        "step.progress, never evidence); None: the trainer's progress is not relayed. Older plans have none.")

    @model_validator(mode="before")
    @classmethod
    def _checkpoint_dir_of_older_plans(cls, data: Any) -> Any:
        # Plans stored before commands.train.checkpoint_subdir existed have no checkpoint_dir; their checkpoint was
        # output_dir itself, so a run planned before an upgrade still resumes with the meaning it was approved with.
        if isinstance(data, dict) and "checkpoint_dir" not in data and "output_dir" in data:
            return {**data, "checkpoint_dir": data["output_dir"]}
        return data

    @property
    def checkpoint_subdir(self) -> str | None:
        """The checkpoint's folder relative to output_dir; None when it is output_dir itself."""
        if self.checkpoint_dir == self.output_dir:
            return None
        return PurePosixPath(self.checkpoint_dir).relative_to(self.output_dir).as_posix()
