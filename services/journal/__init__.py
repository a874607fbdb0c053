"""The journal: sole writer of each run's events.jsonl, over every stream."""
