"""What the capacity step saw and decided: strict, versioned models.

`Verdict` is what `check.check_node` returns (raw outputs included, in
memory); `CapacitySnapshot` is what the bundle keeps (`capacity/<check_id>/
snapshot.json`), the same facts with every raw output stored as its own
hashed artifact and referenced.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import Field

from contracts.campaign import Scheduler
from contracts.envelope import ArtifactRef, Key, RunId, Strict

SNAPSHOT_VERSION: Final = 1

WorkloadKind = Literal["slurm_job", "pod", "process", "gpu_process"]


IDLE_CHECK_SKIPPED = (
    "Why the operator's idle check ran on no node in this check, when it did not: the run is not acknowledged "
    "(acknowledgements.i_understand_this_mutates_cluster false), so the selection rests on the scheduler's read-only "
    "view alone and the idle check runs at the pre-launch re-check of an acknowledged run. None when it ran on every "
    "candidate the workloads left."
)


class Workload(Strict):
    """One running workload seen on a node (a job, a pod, a process)."""

    kind: WorkloadKind = Field(description="slurm_job, pod, process (labelled or vLLM), or gpu_process (nvidia-smi).")
    ref: str = Field(description="Scheduler handle: Slurm job ID, namespace/pod, or process ID.")
    name: str = Field(description="Job name, pod name, or process command line (shortened).")
    state: str = Field(
        description="State as the scheduler reported it (RUNNING, Running, ...); 'running' for processes."
    )
    experiment: str | None = Field(
        default=None, description="experiment=<run-id> label the workload carries, when it carries one."
    )
    detail: str | None = Field(default=None, description="Anything else that identifies it (user, owner, GPU).")


class NodeView(Strict):
    """One node as the scheduler (or this machine) showed it."""

    name: str = Field(description="Node name as the scheduler knows it.")
    state: str | None = Field(description="Raw scheduler state (sinfo %T, Ready condition); None for local.")
    labels: dict[str, str] = Field(
        default_factory=dict, description="Labels or features; recorded only, never used to decide idleness."
    )
    partitions: list[str] = Field(default_factory=list, description="Slurm partitions the node is in.")
    cpus: float | None = Field(default=None, ge=0, description="CPUs the scheduler offers on the node.")
    memory_mb: float | None = Field(default=None, ge=0, description="Memory the scheduler offers, in MiB.")
    gpus: int | None = Field(default=None, ge=0, description="GPUs on the node, when known.")
    load_1m: float | None = Field(default=None, ge=0, description="1-minute load average (local only); recorded only.")
    workloads: list[Workload] = Field(default_factory=list, description="Running workloads on the node.")
    infrastructure: list[Workload] = Field(
        default_factory=list,
        description="Per-node system workloads that run on every node (DaemonSet and static pods); recorded, "
        "not counted as workloads.",
    )
    blockers: list[str] = Field(
        default_factory=list,
        description="Why the scheduler itself would not place work here (down, drained, cordoned, NotReady, "
        "tainted), or why its state says busy when no workload is visible.",
    )


class Capture(Strict):
    """One raw output as read: a command's stdout/stderr, or a file of /proc."""

    name: Key = Field(description="Short unique name: sinfo, squeue, kubectl-nodes, proc-meminfo, idle-check-<node>.")
    source: str = Field(description="The command line or file path it came from, for people.")
    argv: list[str] | None = Field(description="The exact argv run (no shell); None for a file read.")
    exit_code: int | None = Field(description="Exit status; None for a file read or a command killed at its timeout.")
    timed_out: bool = Field(default=False, description="True when the command was killed at its timeout.")
    duration_s: float = Field(ge=0, description="Wall time of the command in seconds (0 for a file read).")
    stdout: str = Field(description="Standard output (or the file's text).")
    stderr: str = Field(default="", description="Standard error.")


class IdleCheckRun(Strict):
    """The operator's idle-node check as run on one node."""

    argv: list[str] = Field(description="The rendered argv that ran (no shell).")
    exit_code: int | None = Field(description="Exit status; 0 means idle; None when killed at its timeout.")
    timed_out: bool = Field(description="True when it ran past its timeout (the node is then not idle).")
    duration_s: float = Field(ge=0, description="Wall time in seconds.")
    timeout_s: float = Field(gt=0, description="The timeout it ran under, in seconds.")


class NodeVerdict(Strict):
    """The decision on one node."""

    node: str = Field(description="Node name.")
    idle: bool = Field(
        description="True only when no workload runs on it, nothing blocks it, and the idle check passed (or was "
        "not run for the whole check: see idle_check_skipped)."
    )
    reasons: list[str] = Field(default_factory=list, description="Why it is not idle, in words; empty when idle.")
    idle_check: IdleCheckRun | None = Field(
        default=None,
        description="The idle check's run; None when workloads already ruled the node out, or when the check "
        "did not run the idle check at all (idle_check_skipped).",
    )


class Verdict(Strict):
    """The outcome of one capacity check, with every raw output read."""

    version: Literal[1] = Field(default=SNAPSHOT_VERSION, description="Verdict format version.")
    run_id: RunId = Field(description="Run the check was made for (its experiment label).")
    scheduler: Scheduler = Field(description="Scheduler that was read.")
    selectors: dict[str, str] = Field(description="Selectors as the campaign gave them.")
    asked_node: str | None = Field(description="The node the caller asked about; None: any idle node.")
    node: str | None = Field(description="The idle node selected; None when none is idle.")
    idle: bool = Field(description="True when `node` is idle and may be used now.")
    reasons: list[str] = Field(description="Why no node is usable (one line per node and cause); empty when idle.")
    nodes: list[NodeView] = Field(description="Every node seen, as seen.")
    verdicts: list[NodeVerdict] = Field(description="The decision on each node considered, in order.")
    idle_check_skipped: str | None = Field(default=None, description=IDLE_CHECK_SKIPPED)
    captures: list[Capture] = Field(description="Raw outputs: scheduler commands, /proc files, idle-check runs.")
    checked_at: datetime = Field(description="UTC time the check finished.")


class CaptureRecord(Strict):
    """A raw output as stored in the bundle."""

    name: Key = Field(description="The capture's name.")
    source: str = Field(description="The command line or file path it came from.")
    argv: list[str] | None = Field(description="The exact argv run; None for a file read.")
    exit_code: int | None = Field(description="Exit status; None for a file read or a timeout.")
    timed_out: bool = Field(description="True when killed at its timeout.")
    duration_s: float = Field(ge=0, description="Wall time in seconds.")
    stdout: ArtifactRef = Field(description="The stdout (or file text) artifact.")
    stderr: ArtifactRef = Field(description="The stderr artifact.")


class CapacitySnapshot(Strict):
    """`capacity/<check_id>/snapshot.json`: everything a capacity check saw and decided."""

    version: Literal[1] = Field(default=SNAPSHOT_VERSION, description="Snapshot format version.")
    run_id: RunId = Field(description="Run the check was made for.")
    check_id: Key = Field(description="Unique ID of this check; the folder its artifacts live in.")
    scheduler: Scheduler = Field(description="Scheduler that was read.")
    selectors: dict[str, str] = Field(description="Selectors as the campaign gave them.")
    idle_check: list[str] = Field(description="The operator's idle-check argv template, unrendered.")
    asked_node: str | None = Field(description="The node the caller asked about; None: any idle node.")
    node: str | None = Field(description="The idle node selected; None when none is idle.")
    idle: bool = Field(description="True when `node` is idle.")
    reasons: list[str] = Field(description="Why no node is usable; empty when idle.")
    nodes: list[NodeView] = Field(description="Every node seen.")
    verdicts: list[NodeVerdict] = Field(description="The decision on each node considered.")
    idle_check_skipped: str | None = Field(default=None, description=IDLE_CHECK_SKIPPED)
    captures: list[CaptureRecord] = Field(description="Every raw output, stored as artifacts.")
    checked_at: datetime = Field(description="UTC time the check finished.")
