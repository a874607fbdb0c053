"""The idle-node check: find a node that is really idle, read-only (docs/capacity.md).

The capacity step runs it to select a node; the trainer-proxy and the bench-runner repeat it on that
node right before they launch (`recheck`). It selects: it never reserves, cancels, evicts or preempts.
"""
