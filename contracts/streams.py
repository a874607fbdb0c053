"""Stream names alone: what a reader of the streams needs without the event models.

`contracts.catalogue` is the one table of streams (model, producer, consumers);
it imports every event model, and with them the campaign schema, which costs a
command that only reads streams (`specdec status`, `watch`, `dlq list`) more
than its whole budget of half a second. The names are repeated here as plain
strings; `contracts.catalogue` checks at import that they are its schemas in its
order, so the two cannot drift apart.
"""

from __future__ import annotations

DEADLETTER = "deadletter"
# The journal's service name, hence its consumer group on every stream: the reading commands ask
# that group what the journal has not taken yet (services/app/runs/streams.py).
JOURNAL = "journal"

# Every catalogue stream's schema, in the catalogue's order (checked there).
SCHEMAS: tuple[str, ...] = (
    "campaign.submitted", "run.approved",
    "profile.requested", "corpus.requested", "capacity.requested", "training.requested", "bench.requested",
    "gate.requested", "report.requested", "publish.requested",
    "profile.failed", "corpus.failed", "capacity.failed", "training.failed", "bench.failed", "gate.failed",
    "report.failed", "publish.failed",
    "profile.completed", "corpus.completed", "capacity.selected", "capacity.unavailable",
    "training.planned", "training.started", "training.completed",
    "bench.planned", "bench.trial.completed", "bench.completed",
    "gate.decided", "report.rendered", "report.published",
)


# The progress stream's schema (contracts/progress.py's StepProgress.SCHEMA): outside SCHEMAS, since
# no consumer group reads it and the journal does not record it; `watch` and the demo follow it beside them.
PROGRESS_SCHEMA = "step.progress"


def stream_name(prefix: str, schema: str) -> str:
    return f"{prefix}.{schema}"


def deadletter_stream(prefix: str) -> str:
    return stream_name(prefix, DEADLETTER)
