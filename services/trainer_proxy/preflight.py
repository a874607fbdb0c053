"""Right before launch: is the planned node still idle?

The capacity step selected the node minutes or hours ago; the trainer-proxy
repeats the same read-only check (services.capacity.check.check_node: the
scheduler's workloads, then the operator's idle check) on that node alone, and
stores what it saw under `training/capacity/<check_id>/`. A node that is no
longer idle stops training before anything starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from contracts.campaign import Campaign
from contracts.envelope import ArtifactRef
from services.runtime.bundle import BundleStore

RECHECK_FOLDER = "training/capacity"


@dataclass(frozen=True)
class Recheck:
    """The verdict of the last check before launch."""

    idle: bool
    reasons: list[str]
    snapshot: ArtifactRef | None


# (bundle, campaign, node, run_id) -> Recheck; runs off the event loop. Raise
# services.trainer_proxy.errors.ExecutorError when the scheduler cannot be read.
RecheckFn = Callable[[BundleStore, Campaign, str, str], Recheck]


def capacity_recheck(bundle: BundleStore, campaign: Campaign, node: str, run_id: str) -> Recheck:
    """The capacity service's own read-only check, on the planned node only."""
    from services.capacity.check import check_node
    from services.capacity.errors import CapacityError
    from services.capacity.runner import SubprocessRunner
    from services.capacity.snapshot import write_snapshot
    from services.trainer_proxy.errors import ExecutorError

    try:
        verdict = check_node(campaign.capacity, node, run_id=run_id, runner=SubprocessRunner())
    except CapacityError as exc:
        raise ExecutorError(f"the capacity check before launch could not run: {exc}") from None
    snapshot = write_snapshot(bundle, verdict, campaign.capacity, folder=RECHECK_FOLDER)
    return Recheck(idle=verdict.idle and verdict.node == node, reasons=list(verdict.reasons), snapshot=snapshot)
