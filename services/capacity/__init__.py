"""Capacity: find a node that is really idle, read-only (docs/design.md#step-3-capacity).

The check itself lives below the steps (services.shared.capacity), because the
trainer-proxy and bench-runner repeat it right before they launch; this
service runs it once per trigger and turns the verdict into an event. It
selects: it never reserves, cancels, evicts or preempts anything.
"""
