"""Health, metrics and logs of a running service."""
