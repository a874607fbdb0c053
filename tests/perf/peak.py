"""A benchmark child's own peak resident memory.

Not `ru_maxrss`: Linux carries the address space a process exec()s from into its
maxrss, and Python's subprocess starts children with vfork, so a child's
`ru_maxrss` is at least its parent's peak at the time (the perf runner's, 401 MB
once the load generator's bench had imported vLLM in it). `VmHWM` in
/proc/self/status is the high-water mark of the child's own address space.
"""

from __future__ import annotations

import resource


def peak_kb() -> int:
    """This process's peak resident memory in kB: VmHWM where Linux has it, else ru_maxrss."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
