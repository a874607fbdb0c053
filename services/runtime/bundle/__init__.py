"""The evidence bundle: paths, records, events and delivery gaps."""
