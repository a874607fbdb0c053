"""The stream catalogue: the single source for wiring, docs and `specdec watch`.

Each event schema has one stream `<prefix>.<schema>`, one producing service and
the services whose consumer groups read it. The journal reads every stream in
a group of its own and is not listed per stream.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts import events as ev
from contracts import layout
from contracts.envelope import Event
from contracts.progress import PROGRESS_UNITS

# The `X as X` names are re-exported (PEP 484): the services take the journal's and the streams' names from here.
from contracts.streams import JOURNAL as JOURNAL
from contracts.streams import SCHEMAS
from contracts.streams import deadletter_stream as deadletter_stream
from contracts.streams import stream_name as stream_name

CLI = "cli"
PROFILER = "profiler"
CORPUS = "corpus"
CAPACITY = "capacity"
TRAINER = "trainer-proxy"
BENCH = "bench-runner"
GATE = "gate"
PUBLISHER = "publisher"

# Services in flow order (the journal is infrastructure, listed last).
SERVICES: tuple[str, ...] = (PROFILER, CORPUS, CAPACITY, TRAINER, BENCH, GATE, PUBLISHER, JOURNAL)


@dataclass(frozen=True)
class StreamSpec:
    """One stream: its event model, producer and consuming services."""

    model: type[Event]
    producer: str
    consumers: tuple[str, ...]

    @property
    def schema(self) -> str:
        return self.model.SCHEMA

    def stream(self, prefix: str) -> str:
        return stream_name(prefix, self.schema)


def _spec(model: type[Event], producer: str, *consumers: str) -> StreamSpec:
    return StreamSpec(model=model, producer=producer, consumers=tuple(consumers))


# Where the services that change the cluster store their plan (contracts.layout).
PLAN_PATHS = layout.PLAN_PATHS

# The owner of each step: the service that consumes <step>.requested and emits <step>.failed.
STEP_OWNER: dict[str, str] = {
    "profile": PROFILER,
    "corpus": CORPUS,
    "capacity": CAPACITY,
    "training": TRAINER,
    "bench": BENCH,
    "gate": GATE,
    "report": PUBLISHER,
    "publish": PUBLISHER,
}

CATALOGUE: tuple[StreamSpec, ...] = (
    _spec(ev.CampaignSubmitted, CLI, PROFILER),
    _spec(ev.RunApproved, CLI, TRAINER, BENCH),
    *(_spec(ev.REQUESTED[step], CLI, owner) for step, owner in STEP_OWNER.items()),
    *(_spec(ev.FAILED[step], owner) for step, owner in STEP_OWNER.items()),
    _spec(ev.ProfileCompleted, PROFILER, CORPUS),
    # The profiler predicts suffix acceptance on the corpus's heldout split (contracts/artifacts/suffix.py).
    _spec(ev.CorpusCompleted, CORPUS, CAPACITY, PROFILER),
    _spec(ev.CapacitySelected, CAPACITY, TRAINER),
    _spec(ev.CapacityUnavailable, CAPACITY),
    _spec(ev.TrainingPlanned, TRAINER),
    _spec(ev.TrainingStarted, TRAINER),
    _spec(ev.TrainingCompleted, TRAINER, BENCH),
    _spec(ev.BenchPlanned, BENCH),
    _spec(ev.BenchTrialCompleted, BENCH),
    _spec(ev.BenchCompleted, BENCH, GATE),
    _spec(ev.GateDecided, GATE, PUBLISHER),
    _spec(ev.ReportRendered, PUBLISHER, PUBLISHER),
    _spec(ev.ReportPublished, PUBLISHER),
)

# Progress (contracts/progress.py) is for people watching, not evidence: its one stream, `<prefix>.step.progress`,
# stays outside CATALOGUE, so no consumer group reads it, the journal does not record it, catch-up never
# publishes it again and the journal's trimmer leaves it alone: each XADD caps it at PROGRESS_MAXLEN entries.
# The producer of a step's progress is the step's owner.
PROGRESS_PRODUCERS: dict[str, str] = {step: STEP_OWNER[step] for step in PROGRESS_UNITS}

BY_SCHEMA: dict[str, StreamSpec] = {spec.schema: spec for spec in CATALOGUE}

# contracts.streams repeats the schemas for readers that skip the models; a drift is a bug here.
if tuple(BY_SCHEMA) != SCHEMAS:
    raise RuntimeError(f"contracts.streams.SCHEMAS is not the catalogue's schemas in order: {tuple(BY_SCHEMA)}")


def consumed_by(service: str) -> list[StreamSpec]:
    """Streams a service's consumer group reads (the journal reads them all)."""
    if service == JOURNAL:
        return list(CATALOGUE)
    return [spec for spec in CATALOGUE if service in spec.consumers]


def produced_by(service: str) -> list[StreamSpec]:
    return [spec for spec in CATALOGUE if spec.producer == service]


# Which step an event's schema reports on, for progress views.
def step_of(schema: str) -> str | None:
    head = schema.split(".", 1)[0]
    return head if head in STEP_OWNER else None
