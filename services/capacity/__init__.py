"""Capacity: find a node that is really idle, read-only (DESIGN.md, flow step 3).

Adapters read the scheduler (Slurm, Kubernetes, or this machine); `idle`
decides from the workloads seen on each node, never from a label or state flag
alone; the operator's idle-node check is applied on top. It selects: it never
reserves, cancels, evicts or preempts anything. `check.check_node` is the same
check the trainer-proxy and bench-runner repeat right before they launch.
"""
