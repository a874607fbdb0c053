"""Errors of the trainer-proxy. Every message says what to do next."""

from __future__ import annotations

from contracts.envelope import ArtifactRef
from services.runtime.errors import SpecdecError


class TrainerProxyError(SpecdecError):
    """Root of every error the trainer-proxy raises on purpose."""


class PlanError(TrainerProxyError):
    """A training plan cannot be built from the campaign and what earlier steps produced."""


class ExecutorError(TrainerProxyError):
    """The scheduler refused or lost the trainer (sbatch failed, job vanished, ...)."""


class ExecutionUnsupported(ExecutorError):
    """The plan's executor cannot be driven from this service (Kubernetes: plan only)."""


class TrainingStopped(TrainerProxyError):
    """Training ran and is not trustworthy; the run halts with `training.failed`.

    Carries what was captured before stopping (stdout, stderr, output hashes),
    so the failure event names the evidence that stays in the bundle.
    """

    def __init__(self, reason: str, *, error_type: str, artifacts: list[ArtifactRef] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error_type = error_type
        self.artifacts = list(artifacts or [])
