"""Right before launch: is the planned node still idle? The capacity step's check, on that node alone.

The trainer-proxy and the bench-runner call it and store what it saw under their own folder; a node
no longer idle stops the launch. `RecheckFailed` (the scheduler could not be read) is not a
`StepFailed`: each caller decides what it means (docs/capacity.md#the-same-check-before-launching).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from contracts.campaign import Campaign
from contracts.envelope import ArtifactRef
from contracts.errors import SpecdecError
from services.runtime.bundle.bundle import BundleStore
from services.shared.capacity.check import check_node
from services.shared.capacity.errors import CapacityError
from services.shared.capacity.snapshot import write_snapshot
from services.shared.scheduler.errors import SchedulerError
from services.shared.scheduler.runner import CommandRunner, SubprocessRunner


class RecheckFailed(SpecdecError):
    """The re-check could not run (the scheduler cannot be read, the idle check is missing)."""

    # The scheduler may answer on the next delivery: retried, not a failed step.
    transient = True


@dataclass(frozen=True)
class Recheck:
    """The verdict of the last check before launch."""

    idle: bool
    reasons: list[str]
    snapshot: ArtifactRef | None


# (bundle, campaign, node, run_id) -> Recheck; runs off the event loop. The
# trainer-proxy's tests pass their own (`training_recheck`); it raises
# RecheckFailed when the scheduler cannot be read.
RecheckFn = Callable[[BundleStore, Campaign, str, str], Recheck]


def recheck(
    bundle: BundleStore, campaign: Campaign, node: str, run_id: str, *, folder: str,
    runner: CommandRunner | None = None,
) -> Recheck:
    """The capacity step's own check on `node` only, stored under `folder`."""
    try:
        verdict = check_node(campaign.capacity, node, run_id=run_id, runner=runner or SubprocessRunner())
    except (CapacityError, SchedulerError) as exc:
        raise RecheckFailed(str(exc)) from None
    snapshot = write_snapshot(bundle, verdict, campaign.capacity, folder=folder)
    return Recheck(idle=verdict.idle and verdict.node == node, reasons=list(verdict.reasons), snapshot=snapshot)
