"""Label cleanup on this machine: the process groups still labelled with a run.

Every child a service starts carries the experiment label in its environment
(services/runtime/processes/procs.py); cleanup selects by that label and the owning
service only, and never kills the caller's own process group.
"""

from __future__ import annotations

from services.runtime.processes.procs import end_labelled


def kill_labelled(run_id: str, service: str, *, grace_s: float, deployment: str | None = None) -> list[int]:
    """Kill the process groups of processes labelled with this run and `service` (and `deployment`
    when given), SIGTERM, then SIGKILL after `grace_s`; the groups killed, in the order found."""
    return list(end_labelled(run_id, service=service, deployment=deployment, grace_s=grace_s))
