"""Delivery: the broker, consumer groups, the ledger, reconcile, catch-up and the service loop."""
