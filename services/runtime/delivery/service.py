"""One service instance: its consumer group, subscribers, and graceful stop.

`bootstrap()` takes every dependency as an argument (broker, ledger, Redis
client, bundle store), so tests pass real or in-memory ones; `serve()` runs an
instance until SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Self

import redis.asyncio as aioredis
import structlog
from faststream import AckPolicy
from faststream.redis import RedisBroker, StreamSub
from redis.exceptions import RedisError
from redis.typing import StreamIdT

from contracts.registry import Registry, default_registry
from services.runtime.backoff import delays
from services.runtime.delivery.broker import Bus, decode_entry, make_broker
from services.runtime.delivery.consumer import Consumer, Delivery, GroupKeeper, Route
from services.runtime.delivery.ledger import Ledger, MemoryLedger, RedisLedger
from services.runtime.health.health import serve_health
from services.runtime.health.metrics import Metrics
from services.runtime.resources import Resources
from services.runtime.settings import RuntimeSettings

RECLAIM_SUFFIX = "~reclaim"


class _Stream(StreamSub):
    """A StreamSub that faststream reads without copying it.

    faststream's subscriber rebuilds its StreamSub on every access
    (`add_prefix` deep-copies it), several times per message and per idle
    poll. specdec's brokers have no prefix (the stream names carry it), so
    the copy is always equal to the original; returning the original is a
    tenth of a service's CPU per message (docs/perf.md).
    """

    def add_prefix(self, prefix: str) -> Self:
        return self if not prefix else super().add_prefix(prefix)


@dataclass
class Service:
    """A service instance wired to its broker; start/stop it with `serve` or in tests."""

    name: str
    settings: RuntimeSettings
    broker: RedisBroker
    bus: Bus
    consumer: Consumer
    routes: Sequence[Route]
    client: aioredis.Redis | None
    # Creates the consumer groups, and again when one vanished; None without Redis (in memory).
    groups: GroupKeeper | None = None

    @property
    def streams(self) -> list[str]:
        return [self.bus.stream_of(route.schema) for route in self.routes]

    def on_reset(self, notice: Callable[[str], None]) -> None:
        """Call `notice(reason)` whenever this instance sees that Redis lost its state while it
        runs: a consumer group recreated, or a running step's lease found gone (the signals
        services/runtime/delivery/reconcile.py's Reconciler waits on)."""
        self.consumer.on_reset = notice
        if self.groups is not None:
            self.groups.on_reset = notice

    async def prepare(self) -> None:
        """Create the consumer groups at the stream's start, so events published
        before this service first ran are still delivered to it."""
        if self.groups is None:
            return
        for stream in self.streams:
            await self.groups.ensure(stream)

    async def start(self) -> None:
        await self.broker.connect()
        await self.prepare()
        await self.broker.start()
        self.consumer.accepting = True

    async def stop(self, grace_s: float | None = None) -> None:
        """Stop taking new work, let in-flight work finish within the grace
        period, then leave whatever is unfinished pending for another instance."""
        self.consumer.accepting = False
        grace = self.settings.shutdown_grace_s if grace_s is None else grace_s
        pending = set(self.consumer.in_flight)
        if pending:
            _, unfinished = await asyncio.wait(pending, timeout=grace)
            # Past the grace period the work is abandoned, unacked: it stays
            # pending and another instance reclaims it.
            for task in unfinished:
                task.cancel()
            if unfinished:  # asyncio.wait refuses an empty set
                await asyncio.wait(unfinished, timeout=5)
        await self.broker.stop()
        if self.client is not None:
            await self.client.aclose()


def _keep_group(service: Service, subscriber: Any, stream: str) -> None:
    """Let a subscriber's read loop outlive its consumer group (`GroupKeeper`).

    faststream's stream subscriber owns the read loop: its `_consume` calls
    `_get_msgs` once per fetch (XREADGROUP for a reader, XAUTOCLAIM for a
    reclaimer) and, on NOGROUP, stops the subscriber for good ("restart the
    application"), so a service whose Redis came back empty never reads again.
    faststream has no hook around the fetch (middlewares, parsers and decoders see
    messages, never the read), so the fetch of this one subscriber is wrapped:
    a NOGROUP reaches specdec's GroupKeeper, which recreates the group, before
    faststream's loop sees it, and the loop goes on. Should a faststream upgrade
    rename the fetch, the service refuses to start instead of losing this quietly.
    """
    if service.groups is None:
        return
    fetch = getattr(subscriber, "_get_msgs", None)
    if fetch is None:
        raise RuntimeError(
            f"faststream's {type(subscriber).__name__} has no _get_msgs: the consumer group recovery "
            "(services/runtime/delivery/service.py, _keep_group) must follow faststream's read loop"
        )
    subscriber._get_msgs = service.groups.guard(fetch, stream)


def _subscriber_for(service: Service, route: Route, sub: StreamSub, consumer_name: str) -> None:
    stream = sub.name
    fresh = not consumer_name.endswith(RECLAIM_SUFFIX)
    context = service.broker.context

    async def on_message(body: Any) -> None:
        # The broker runs without faststream's argument injection (a per-message
        # cost); the message itself comes from faststream's context.
        message = context.get_local("message")
        delivery = Delivery(message, stream=stream, consumer=consumer_name, group=service.name, fresh=fresh)
        await service.consumer.handle(route, delivery)

    role = "read" if fresh else "reclaim"
    on_message.__name__ = f"{service.name}:{route.schema}:{role}"
    # None is faststream's own default (one worker).
    workers = service.settings.max_concurrency if service.settings.max_concurrency > 1 else None
    subscriber = service.broker.subscriber(
        stream=sub, ack_policy=AckPolicy.MANUAL, title=f"{stream}:{service.name}:{role}", max_workers=workers
    )
    subscriber(on_message)
    _keep_group(service, subscriber, stream)


# Entries one reader takes per XREADGROUP when the instance handles one message at a
# time: a backlog then costs one read per batch instead of one per entry, and a
# lone event is returned at once all the same (COUNT is an upper bound).
READ_BATCH = 32


class _Entry:
    """One entry of a batch read, as the consumer sees a delivery: a fresh read
    (XREADGROUP >) is its first delivery; it is acked alone, by its ID."""

    fresh = True

    def __init__(self, client: aioredis.Redis, message_id: bytes, fields: dict[bytes, bytes], *,
                 stream: str, consumer: str, group: str) -> None:
        self.client = client
        self.message_id = message_id.decode()
        self.body, _ = decode_entry(fields)
        self.stream = stream
        self.consumer = consumer
        self.group = group

    async def delivery_count(self) -> int:
        return 1

    async def ack(self) -> None:
        await self.client.xack(self.stream, self.group, self.message_id)


@dataclass
class _Batch:
    """The entries of one read still waiting for their turn, and when the running one began."""

    waiting: set[str]
    step_began: float


async def _keep_waiting(service: Service, stream: str, consumer: str, batch: _Batch) -> None:
    """Keep a batch's read-but-unstarted entries from being reclaimed while this
    instance works through the batch: every heartbeat, reset their idle time
    (XCLAIM JUSTID by the reader, no delivery counted), as the consumer's
    heartbeat does for the running one. An instance that dies stops touching
    them and they become reclaimable as usual. While one step of the batch runs
    longer than the reclaim idle time, the entries behind it are not touched:
    they go idle and another instance reclaims them instead of waiting for that
    step (the ledger's lease keeps each step from running twice)."""
    assert service.client is not None
    settings = service.settings
    log = structlog.get_logger().bind(service=service.name, stream=stream)
    while True:
        await asyncio.sleep(settings.heartbeat_s)
        if not batch.waiting:
            return
        if time.monotonic() - batch.step_began >= settings.reclaim_idle_ms / 1000:
            continue
        try:
            waiting: list[StreamIdT] = list(sorted(batch.waiting))
            await service.client.xclaim(stream, service.name, consumer, min_idle_time=0,
                                        message_ids=waiting, justid=True)
        except (RedisError, OSError) as exc:
            # The next beat retries; should Redis stay away past the idle time the
            # entries are reclaimed elsewhere, and the ledger's lease decides who runs each.
            log.warning("cannot keep a read batch's waiting entries; retrying", error=f"{type(exc).__name__}: {exc}")


async def _raw_entries(message: Any, original: Any) -> Any:
    """The batch reader's parser: faststream's own decodes every entry's body and
    JSON-encodes the list, work `_Entry` does again; so faststream parses an
    empty batch, and the message carries the raw entries."""
    parsed = await original({**message, "data": []})
    parsed.raw_message = message
    return parsed


async def _no_body(message: Any) -> None:
    """The batch reader's decoder: none, the entries are decoded one by one (`_Entry`)."""


def _batch_reader_for(service: Service, route: Route, sub: StreamSub, consumer_name: str) -> None:
    stream = sub.name
    context = service.broker.context
    assert service.client is not None
    client = service.client

    async def on_batch(body: Any) -> None:
        message = context.get_local("message")
        raw = message.raw_message
        entries = [
            _Entry(client, message_id, fields, stream=stream, consumer=consumer_name, group=service.name)
            for message_id, fields in zip(raw["message_ids"], raw["data"], strict=True)
        ]
        batch = _Batch(waiting={entry.message_id for entry in entries[1:]}, step_began=time.monotonic())
        keeper = asyncio.create_task(_keep_waiting(service, stream, consumer_name, batch)) if batch.waiting else None
        try:
            for entry in entries:
                batch.waiting.discard(entry.message_id)
                batch.step_began = time.monotonic()
                # Once the instance is stopping, handle() takes nothing new: the
                # rest of the batch stays pending, unacked, for another instance.
                # An entry with another behind it leaves its done mark and ack to
                # that entry's lease: one round trip per entry instead of two.
                await service.consumer.handle(route, entry, defer_finish=entry is not entries[-1])
        finally:
            if keeper is not None:
                keeper.cancel()
            await service.consumer.flush()

    on_batch.__name__ = f"{service.name}:{route.schema}:read"
    subscriber = service.broker.subscriber(
        stream=sub, ack_policy=AckPolicy.MANUAL, title=f"{stream}:{service.name}:read",
        parser=_raw_entries, decoder=_no_body,
    )
    subscriber(on_batch)
    _keep_group(service, subscriber, stream)


def bootstrap(
    name: str,
    routes: Sequence[Route],
    *,
    settings: RuntimeSettings,
    broker: RedisBroker | None = None,
    client: aioredis.Redis | None = None,
    ledger: Ledger | None = None,
    registry: Registry | None = None,
    resources: Resources | None = None,
    in_memory: bool = False,
) -> Service:
    """Wire one service. `in_memory=True` uses an in-process ledger and no Redis
    client (for faststream's TestRedisBroker); otherwise Redis backs both."""
    broker = broker or make_broker(settings)
    bus = Bus(broker, settings.stream_prefix)
    if in_memory:
        client = None
        ledger = ledger or MemoryLedger()
    else:
        # One instance handling one message at a time sends its ledger commands one
        # after another: one connection, without a pool's checkout per command
        # (a tenth of the CPU per message, docs/perf.md). Concurrent handlers keep the pool.
        client = client or aioredis.Redis.from_url(
            settings.redis_url, single_connection_client=settings.max_concurrency == 1
        )
        ledger = ledger or RedisLedger(client, settings.stream_prefix)

    touch = give_back = None
    if client is not None:
        redis_client = client

        async def touch(stream: str, group: str, consumer: str, message_id: str) -> None:
            # XCLAIM to the same consumer with JUSTID resets the idle time
            # without counting a delivery: the lease heartbeat of a long step.
            await redis_client.xclaim(stream, group, consumer, min_idle_time=0, message_ids=[message_id], justid=True)

        async def give_back(stream: str, group: str, consumer: str, message_id: str, *, count: int) -> None:
            # RETRYCOUNT sets the delivery count (JUSTID alone leaves it): a delivery that
            # found its step running is not counted (services/runtime/delivery/consumer.py).
            await redis_client.xclaim(stream, group, consumer, min_idle_time=0, message_ids=[message_id], justid=True,
                                      retrycount=count)

    consumer = Consumer(
        service=name,
        settings=settings,
        registry=registry or default_registry(),
        ledger=ledger,
        bus=bus,
        touch=touch,
        give_back=give_back,
        resources=resources,
        metrics=Metrics(name),
    )
    groups = GroupKeeper(client, name, structlog.get_logger().bind(service=name)) if client is not None else None
    service = Service(name=name, settings=settings, broker=broker, bus=bus, consumer=consumer, routes=routes,
                      client=client, groups=groups)
    for route in routes:
        stream = bus.stream_of(route.schema)
        reader = settings.instance
        reclaimer = settings.instance + RECLAIM_SUFFIX
        if client is not None and settings.max_concurrency == 1:
            # A batch per read, its waiting entries kept alive (`_keep_waiting`).
            _batch_reader_for(service, route, _Stream(
                stream, group=name, consumer=reader, polling_interval=settings.read_block_ms,
                max_records=READ_BATCH, batch=True,
            ), reader)
        else:
            # One entry per read: concurrent handlers (max_concurrency > 1) each take
            # their own, and the in-memory transport has no pending list to keep.
            reader_sub = _Stream(
                stream, group=name, consumer=reader, polling_interval=settings.read_block_ms, max_records=1
            )
            _subscriber_for(service, route, reader_sub, reader)
        _subscriber_for(
            service,
            route,
            _Stream(
                stream,
                group=name,
                consumer=reclaimer,
                min_idle_time=settings.reclaim_idle_ms,
                polling_interval=settings.reclaim_poll_ms,
            ),
            reclaimer,
        )
    return service


async def start_health(service: Service) -> asyncio.AbstractServer | None:
    """The instance's /health and /metrics endpoint on SPECDEC_HEALTH_PORT; None when it is 0 (off)."""
    if not service.settings.health_port:
        return None
    return await serve_health(service, service.settings.health_port)


# Waits before starting again after Redis went away during a start: 0.5 s doubling to 5 s.
START_RETRY_S = 0.5
START_RETRY_MAX_S = 5.0


async def start_riding_out(service: Service, stop: asyncio.Event, log: Any) -> bool:
    """Start the instance; should Redis go away while it starts (its subscribers are started one
    by one, seconds on a busy host), stop what started and start again once Redis answers, with
    backoff and one line per attempt, instead of exiting. False when SIGTERM came first."""
    waits = delays(START_RETRY_S, START_RETRY_MAX_S)
    while not stop.is_set():
        try:
            await service.start()
            return True
        except (RedisError, TimeoutError, OSError) as exc:  # faststream's start wait raises TimeoutError
            wait_s = next(waits)
            log.warning("Redis went away while the service started; starting again once it answers",
                        error=f"{type(exc).__name__}: {exc}", retry_in_s=wait_s)
            service.consumer.accepting = False
            try:
                await service.broker.stop()
            except (RedisError, OSError):
                pass  # nothing more to stop on a connection that is gone
            try:
                await asyncio.wait_for(stop.wait(), timeout=wait_s)
            except TimeoutError:
                pass  # waited out the backoff: try again
    return False


async def serve(service: Service, started: Callable[[], None] | None = None) -> None:
    """Run until SIGTERM or SIGINT, then stop gracefully; `started()` once the instance serves."""
    log = structlog.get_logger().bind(service=service.name, instance=service.settings.instance)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if not await start_riding_out(service, stop, log):
        return
    health = await start_health(service)
    log.info("service started", streams=service.streams, health_port=service.settings.health_port or None)
    if started is not None:
        started()
    await stop.wait()
    log.info("stopping: no new work; in-flight work may finish", grace_s=service.settings.shutdown_grace_s)
    await service.stop()
    if health is not None:
        health.close()
        await health.wait_closed()
    log.info("service stopped")
