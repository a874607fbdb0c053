"""Errors of the trainer-proxy. Every message says what to do next.

`TrainerProxyError` is a `StepFailed`: one that propagates is `training.failed`
with its reason and the class name as `error_type`. The executors' failures
(`ExecutorError`) are caught where they happen and recorded in the capture;
`TrainingStopped` names the evidence kept.
"""

from __future__ import annotations

from services.runtime.errors import StepFailed


class TrainerProxyError(StepFailed):
    """Root of every error the trainer-proxy raises on purpose."""


class PlanError(TrainerProxyError):
    """A training plan cannot be built from the campaign and what earlier steps produced."""


class ExecutorError(TrainerProxyError):
    """The scheduler refused or lost the trainer (sbatch failed, job vanished, ...)."""


class ExecutionUnsupported(ExecutorError):
    """The plan's executor cannot be driven from this service (Kubernetes: plan only)."""


class TrainingStopped(TrainerProxyError):
    """Training ran and is not trustworthy; the run halts with `training.failed`.

    Raised with the error_type that names why (TrainingTimeout, NonFiniteLoss,
    ProbeFailed, ...) and the artifacts captured before stopping (stdout,
    stderr, output hashes), so the failure event names the evidence that stays
    in the bundle.
    """
