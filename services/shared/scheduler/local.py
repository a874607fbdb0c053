"""Label cleanup on this machine: the process groups still labelled with a run.

Every child a service starts carries the experiment label in its environment
(services/runtime/procs.py); cleanup selects by that label and the owning
service only, and never kills the caller's own process group.
"""

from __future__ import annotations

import os

from services.runtime.procs import kill_group, labelled_processes


def kill_labelled(run_id: str, service: str, *, grace_s: float) -> list[int]:
    """Kill the process groups of processes labelled with this run and `service`
    (SIGTERM, then SIGKILL after `grace_s`); the groups killed, in the order found."""
    groups: list[int] = []
    for proc in labelled_processes(service):
        if proc.run_id != run_id or proc.pgid in groups or proc.pgid == os.getpgrp():
            continue
        groups.append(proc.pgid)
        kill_group(proc.pgid, grace_s=grace_s)
    return groups
