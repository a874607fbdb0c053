"""Which cores a process may run on: vLLM's engine has core 0, specdec's own processes the rest.

So neither steals the engine's core during a measured window (docs/design.md#threads-and-cores); every
workload a service starts gets the whole machine again, whatever its parent was pinned to. On one core
there is nothing to keep apart: every set is that core.
"""

from __future__ import annotations

import os

ENGINE_CORE = 0


def machine_cpus() -> set[int]:
    """Every core of the machine (not this process's affinity, which may be narrowed)."""
    return set(range(os.cpu_count() or 1))


def specdec_cpus() -> set[int]:
    """The cores for specdec's own processes: all but the engine's, when there are others."""
    cpus = machine_cpus()
    return (cpus - {ENGINE_CORE}) or cpus


def pin(cpus: set[int], pid: int = 0) -> None:
    """Restrict `pid` (0: this process) to `cpus`; where the platform has no affinity, do nothing.

    The kernel intersects the mask with the cores the process's cgroup allows; an
    OSError (no allowed core in the set) leaves the affinity as it was."""
    setter = getattr(os, "sched_setaffinity", None)
    if setter is None:
        return
    try:
        setter(pid, cpus)
    except OSError:
        pass  # the cgroup allows none of these cores: running anywhere beats not running
