"""How a training plan starts its trainer: one launch per executor kind.

These are the parts of the plan (`services.trainer_proxy.planning.plan`) that the
executors read (`local`, `slurm`) and the capture records; they live apart
from the plan's builder so that an executor never imports the plan and the
plan never imports an executor.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from contracts.envelope import Strict

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
        "environment passes but the platform's (services/runtime/workload_env.py).")
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
        "environment passes but the platform's (services/runtime/workload_env.py): sbatch runs with that environment and passes it to the job.")
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
