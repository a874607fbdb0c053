"""The idle-node check: find a node that is really idle, read-only.

The capacity step runs it to select a node (docs/design.md#step-3-capacity); the
trainer-proxy and the bench-runner repeat it on that node right before they
launch (`recheck`). Observers read the scheduler (`slurm`, `kubernetes`, or
this machine: `local`); `idle` decides from the workloads seen on each node,
never from a label or state flag alone; the operator's idle-node check is
applied on top (`check`). `snapshot` writes what was seen into the bundle
(`model`). It selects: it never reserves, cancels, evicts or preempts anything.
"""
