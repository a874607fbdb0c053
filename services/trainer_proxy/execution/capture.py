"""Everything about a trainer run, into the bundle, write-once and hashed
(docs/trainer-proxy.md#what-lands-in-the-bundle).

The argv is recorded before anything starts; the outputs are hashed, partial or not, and never deleted.
An earlier delivery's output manifest (it died before the capture) is kept as it is: re-capturing never
writes `training/outputs.json` again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final, Literal

from pydantic import Field

from contracts import layout
from contracts.artifacts.training import OutputFile, OutputManifest
from contracts.envelope import ArtifactRef, RunId, Sha256, Strict
from services.runtime.bundle.bundle import BundleStore, InvalidPath, hash_file
from services.shared.secret_args import mask_argv
from services.trainer_proxy.errors import ExecutionUnsupported
from services.trainer_proxy.execution.detached import EXIT_RECORD, KEEPER_RECORD
from services.trainer_proxy.execution.loss import LossSummary
from services.trainer_proxy.execution.monitor import RunOutcome
from services.trainer_proxy.execution.slurm import JOB_RECORD
from services.trainer_proxy.planning.model import LocalLaunch, SlurmLaunch, TrainingPlan

CAPTURE_VERSION: Final = 1
# What the executors record of the run as it goes (the keeper's pids and exit, the Slurm job ID):
# registered with the capture, as evidence of how the run's end was known.
RUN_RECORDS = (KEEPER_RECORD, EXIT_RECORD, JOB_RECORD)


class TrainingCapture(Strict):
    """`training/capture.json`: how the trainer ran and ended."""

    version: Literal[1] = Field(default=CAPTURE_VERSION, description="Format version.")
    run_id: RunId = Field(description="The run.")
    plan_sha256: Sha256 = Field(description="The approved plan that ran.")
    executor: str = Field(description="local, slurm or kubernetes.")
    node: str = Field(description="Node the trainer ran on.")
    handle: str = Field(description="Process ID or Slurm job ID.")
    argv: list[str] = Field(description="The trainer's exact argv (no shell).")
    launched_argv: list[str] = Field(description="What specdec executed: the argv itself, or the sbatch argv.")
    cwd: str = Field(description="Working directory.")
    exit_code: int | None = Field(description="Exit status; None when killed by a signal or cancelled.")
    signal: int | None = Field(description="Signal that ended it, when one did.")
    duration_s: float = Field(ge=0, description="Wall time from launch to the end of the main process, seconds.")
    timed_out: bool = Field(description="True when it ran past timeout_s and was killed with its children.")
    stopped_for_loss: bool = Field(description="True when a non-finite loss made specdec stop it early.")
    interrupted: bool = Field(description="True when the service stopped or died before this run was captured.")
    launch_error: str | None = Field(
        description="Why the executor failed to run the trainer (not started, job lost); None otherwise."
    )
    losses: list[LossSummary] = Field(description="The loss scan of stdout and stderr.")
    stdout: ArtifactRef = Field(description="The trainer's stdout.")
    stderr: ArtifactRef = Field(description="The trainer's stderr.")
    outputs: ArtifactRef = Field(description="training/outputs.json.")
    output_files: int = Field(ge=0, description="Entries in the output manifest.")
    scheduler_record: str | None = Field(description="Slurm's last record of the job; None locally.")


def write_argv(bundle: BundleStore, plan: TrainingPlan) -> ArtifactRef:
    launch = plan.launch
    # Evidence for readers: a secret-bearing flag's value is masked (the plan keeps what was launched).
    record = {
        "executor": plan.executor,
        "node": plan.node,
        "argv": mask_argv(launch.argv),  # type: ignore[union-attr]  # only a plan that launches gets here (_launch)
        "launched_argv": mask_argv(getattr(launch, "sbatch_argv", None) or getattr(launch, "apply_argv", None)
                                   or launch.argv),  # type: ignore[union-attr]  # as above
        "env": list(getattr(launch, "env", None) or []),
        "cwd": getattr(launch, "cwd", None),
        "label": {"experiment": plan.run_id},
        "shell": False,
    }
    return bundle.write_json(plan.run_id, layout.TRAINING_ARGV, record)


def _register_stream(bundle: BundleStore, run_id: str, relpath: str) -> ArtifactRef:
    # A stream Slurm never created (job failed before starting) is recorded empty.
    if (bundle.run_dir(run_id) / relpath).exists():
        return bundle.register_file(run_id, relpath)
    return bundle.write_bytes(run_id, relpath, b"")


def hash_outputs(
    bundle: BundleStore, run_id: str, *, output_dir: Path, partial: bool, reused_from: str | None = None,
    checkpoint_subdir: str | None = None,
) -> tuple[ArtifactRef, OutputManifest]:
    """Register every file under the output directory and write the manifest, naming the checkpoint's folder."""
    entries: list[OutputFile] = []
    if output_dir.is_dir():
        for root, dirs, files in os.walk(output_dir, followlinks=False):
            dirs.sort()
            names = sorted(files) + sorted(d for d in dirs if os.path.islink(os.path.join(root, d)))
            for name in names:
                path = Path(root) / name
                rel = path.relative_to(output_dir).as_posix()
                entries.append(_entry(bundle, run_id, path, rel))
    entries.sort(key=lambda entry: entry.path)
    manifest = OutputManifest(
        run_id=run_id,
        output_dir=str(output_dir),
        checkpoint_subdir=checkpoint_subdir,
        partial=partial,
        files=entries,
        total_bytes=sum(entry.size_bytes or 0 for entry in entries),
        reused_from=reused_from,
    )
    return (bundle.write_bytes(run_id, layout.TRAINING_OUTPUTS, manifest.model_dump_json(indent=2).encode() + b"\n"),
            manifest)


def _entry(bundle: BundleStore, run_id: str, path: Path, rel: str) -> OutputFile:
    if path.is_symlink():
        return OutputFile(path=rel, kind="symlink", sha256=None, size_bytes=None, uri=None,
                          note=f"symlink to {os.readlink(path)!r}, not followed")
    if not path.is_file():
        return OutputFile(path=rel, kind="other", sha256=None, size_bytes=None, uri=None, note="not a regular file")
    try:
        ref = bundle.register_file(run_id, f"{layout.TRAINING_OUTPUT_DIR}/{rel}")
    except InvalidPath:
        # A name the bundle cannot take as an artifact path (a leading dot, a
        # space): still hashed and listed, where it lies.
        sha, size = hash_file(path)
        return OutputFile(path=rel, kind="file", sha256=sha, size_bytes=size, uri=None,
                          note="name is not a valid bundle path; hashed in place")
    return OutputFile(path=rel, kind="file", sha256=ref.sha256, size_bytes=ref.size_bytes, uri=ref.uri)


def capture_run(
    bundle: BundleStore, plan: TrainingPlan, plan_sha256: str, outcome: RunOutcome
) -> tuple[TrainingCapture, ArtifactRef, OutputManifest]:
    """Record stdout, stderr, every output and the run's end; returns the capture and its ref."""
    run_id = plan.run_id
    launch = plan.launch
    if not isinstance(launch, (LocalLaunch, SlurmLaunch)):
        raise ExecutionUnsupported("only local and Slurm runs are captured; a Kubernetes plan is plan-only")
    stdout = _register_stream(bundle, run_id, launch.stdout_path)
    stderr = _register_stream(bundle, run_id, launch.stderr_path)
    for record in RUN_RECORDS:
        if (bundle.run_dir(run_id) / record).is_file():
            bundle.register_file(run_id, record)
    clean = outcome.exit_code == 0 and not (outcome.timed_out or outcome.stopped_for_loss or outcome.interrupted
                                            or outcome.launch_error)
    earlier = _earlier_manifest(bundle, run_id)
    if earlier is not None:
        # A delivery that died after writing the manifest and before the capture: its manifest
        # stands (write-once), whatever this delivery makes of the run's end.
        outputs_ref, manifest = earlier
    else:
        outputs_ref, manifest = hash_outputs(bundle, run_id, output_dir=Path(plan.output_dir), partial=not clean,
                                             checkpoint_subdir=plan.checkpoint_subdir)
    capture = TrainingCapture(
        run_id=run_id,
        plan_sha256=plan_sha256,
        executor=plan.executor,
        node=plan.node,
        handle=outcome.handle,
        argv=mask_argv(launch.argv),
        launched_argv=mask_argv(outcome.launched_argv),
        cwd=launch.cwd,
        exit_code=outcome.exit_code,
        signal=outcome.signal,
        duration_s=outcome.duration_s,
        timed_out=outcome.timed_out,
        stopped_for_loss=outcome.stopped_for_loss,
        interrupted=outcome.interrupted,
        launch_error=outcome.launch_error,
        losses=outcome.losses,
        stdout=stdout,
        stderr=stderr,
        outputs=outputs_ref,
        output_files=len(manifest.files),
        scheduler_record=outcome.scheduler_record,
    )
    ref = bundle.write_bytes(run_id, layout.TRAINING_CAPTURE, capture.model_dump_json(indent=2).encode() + b"\n")
    return capture, ref, manifest


def _earlier_manifest(bundle: BundleStore, run_id: str) -> tuple[ArtifactRef, OutputManifest] | None:
    ref = bundle.adopt(run_id, layout.TRAINING_OUTPUTS)
    if ref is None:
        return None
    return ref, OutputManifest.model_validate_json(bundle.read_bytes(run_id, layout.TRAINING_OUTPUTS))


def read_capture(bundle: BundleStore, run_id: str) -> tuple[TrainingCapture, ArtifactRef] | None:
    """The capture of an earlier delivery of this step, when there is one. A delivery killed after writing
    capture.json and before its index record left a whole file (the bundle publishes files whole): it is
    adopted, so the trainer's end is read as it was captured, never re-captured as interrupted."""
    ref = bundle.adopt(run_id, layout.TRAINING_CAPTURE)
    if ref is None:
        return None
    return TrainingCapture.model_validate_json(bundle.read_bytes(run_id, layout.TRAINING_CAPTURE)), ref
