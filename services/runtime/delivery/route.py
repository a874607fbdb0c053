"""What the consumer is handed for one message, and what a step's handler is given.

A service registers a `Route` per consumed stream (its schema, its `Handler`, how its step
key is named); the transport hands the consumer a `Delivery` per message; the handler runs
with a `StepContext`. services/runtime/delivery/consumer.py applies the delivery semantics
between them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, Protocol, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from contracts.envelope import Event
from services.runtime.backoff import delays
from services.runtime.delivery.broker import Bus
from services.runtime.delivery.ledger import Ledger
from services.runtime.resources import Resources
from services.runtime.settings import RuntimeSettings

# Waits between attempts of a progress event over a dropped connection: ~62 s in all.
EMIT_RETRIES_S = tuple(islice(delays(0.25, 30.0), 8))  # 0.25, 0.5, ... 16, 30: the one backoff's doubling

T = TypeVar("T")


async def retry_dropped(op: Callable[[], Awaitable[T]], waits: Sequence[float], log: Any, message: str,
                        **fields: Any) -> T:
    """Run `op`, retrying a dropped Redis connection after each of `waits`; the last error goes to the caller."""
    for wait_s in (*waits, None):
        try:
            return await op()
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            if wait_s is None:
                raise
            log.warning(message, error=f"{type(exc).__name__}: {exc}", retry_in_s=wait_s, **fields)
            await asyncio.sleep(wait_s)
    raise AssertionError("unreachable")  # the loop returns or raises


@dataclass(frozen=True)
class Lease:
    """The lease a running step holds: its key and owner, and the other leases on its run.

    While a handler runs, its own lease is held (the consumer began it); whether any other
    live instance holds work of the same run is a question for the ledger, asked when the
    handler needs it (the bench-runner, before it ends what an earlier owner left).
    """

    key: str  # the step key as the ledger renders it: `<service>:<run_id>:<schema>:<step>`
    owner: str
    ledger: Ledger

    @property
    def run_id(self) -> str:
        return self.key.split(":", 2)[1]

    async def others(self) -> dict[str, str]:
        """Other in-flight leases of this service on this run (key -> owner); empty: this step alone."""
        service = self.key.split(":", 1)[0]
        return {key: owner for key, owner in (await self.ledger.holders(service)).items()
                if key.split(":", 2)[1] == self.run_id and not (key == self.key and owner == self.owner)}


@dataclass
class StepContext:
    """What a handler may use besides its event: publish progress, the lease, the log."""

    service: str
    settings: RuntimeSettings
    bus: Bus
    log: Any
    # Set by the runtime: the service's resources (services/runtime/resources.py); None outside a consumer.
    resources: Resources | None = None
    # The lease this step holds (None where a handler runs outside a consumer, as in unit tests).
    lease: Lease | None = None

    async def emit(self, event: Event) -> None:
        """Publish a progress event now (training.started, bench.trial.completed, ...).

        A dropped connection (a Redis restart) is retried for about a minute before
        the error reaches the handler: the step's work behind the event is done and
        recorded by then (a trial's result file), and a step retried later adopts
        that work without announcing it again, so an emit that gave up at once
        would lose the event. The heartbeat keeps the lease meanwhile. A repeated
        publish carries the same event_id (the journal and every consumer dedup it).
        """
        await retry_dropped(lambda: self.bus.publish(event), EMIT_RETRIES_S, self.log,
                            "a progress event cannot reach Redis; retrying", schema=event.SCHEMA,
                            event_id=event.event_id)


Handler = Callable[[Event, StepContext], Awaitable[Sequence[Event]]]
StepKeyFn = Callable[[Event], str]


@dataclass(frozen=True)
class Route:
    """One consumed stream: its schema, the handler, and how to name the step key."""

    schema: str
    handler: Handler
    # The step key a handler is idempotent on; the default is one step per
    # (run, schema) for this service.
    step_key: StepKeyFn = lambda event: "step"
    # The step whose `<step>.failed` a StepFailed becomes; default: the schema's step.
    failure_step: str | None = None
    # The schemas that complete this step (services/runtime/delivery/adopt.py): when set, and the service has
    # a bundle, a completed step is recorded in it before its outputs are published, and a delivery
    # whose ledger lost the step (Redis restarted empty) re-emits the recorded events instead of
    # running. Empty: the ledger alone decides (the journal, whose step is one append).
    outputs: tuple[str, ...] = ()


class Delivered(Protocol):
    """What the consumer reads of a delivery: a `Delivery`, one entry of a batch read (service.py's `_Entry`)
    or an event catch-up takes up from the bundle (catchup.py's `_Known`)."""

    stream: str
    consumer: str
    group: str
    fresh: bool

    @property
    def message_id(self) -> str: ...

    @property
    def body(self) -> bytes: ...

    async def delivery_count(self) -> int: ...

    async def ack(self) -> None: ...


class Delivery:
    """The transport-side view of one delivered message (faststream or a test double)."""

    def __init__(self, message: Any, *, stream: str, consumer: str, group: str = "", fresh: bool = False) -> None:
        self.message = message
        self.stream = stream
        self.consumer = consumer
        self.group = group
        # A fresh read (XREADGROUP >) is by definition the first delivery:
        # no XPENDING round trip is needed to know its count.
        self.fresh = fresh

    @property
    def message_id(self) -> str:
        ids = self.message.raw_message.get("message_ids") or [b"0-0"]
        first = ids[0]
        return first.decode() if isinstance(first, bytes) else str(first)

    @property
    def body(self) -> bytes:
        body: bytes = self.message.body
        return body

    async def delivery_count(self) -> int:
        if self.fresh:
            return 1
        count: int = await self.message.get_delivery_count()
        return count

    async def ack(self) -> None:
        await self.message.ack()


Touch = Callable[[str, str, str, str], Awaitable[None]]
