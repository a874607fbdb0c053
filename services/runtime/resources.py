"""What a service's routes may use besides the broker: `Resources`, built once per service.

services/runtime/main.py's `resources_for` builds it from its dependencies, given as
arguments (a test passes its own bundle store and doubles); `routes(resources)`, the
consumer (StepContext.resources), the catch-up and an app's after_reconcile hook share it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from contracts.campaign import Campaign
from services.runtime.bundle.bundle import BundleStore

# The bench-runner's pre-launch check of a node: None when it is idle, else why not.
NodeCheck = Callable[[str], Awaitable[str | None]]
# The trainer-proxy's pre-launch check, (bundle, campaign, node, run_id) -> its verdict: RecheckFn in
# services/shared/capacity/recheck.py, whose Recheck is not named here (shared code sits above the runtime).
TrainingRecheck = Callable[[BundleStore, Campaign, str, str], Any]
# How the capacity step runs the scheduler's commands: CommandRunner in services/shared/scheduler/runner.py.
CapacityRunner = Callable[..., Any]


@dataclass(frozen=True)
class Resources:
    """A service's dependencies besides the broker; each check left None is the step's own."""

    bundle: BundleStore
    # Doubles a test attaches for the steps' checks against the cluster; production leaves them None.
    bench_recheck: NodeCheck | None = None
    training_recheck: TrainingRecheck | None = None
    capacity_runner: CapacityRunner | None = None
    # What a service keeps for the life of its process, shared by its routes and its after_reconcile
    # hook (the journal's trimmer and periodic repair): the service puts it here on first use.
    state: dict[str, Any] = field(default_factory=dict, compare=False)
