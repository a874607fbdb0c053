"""One service instance: its consumer group, subscribers, and graceful stop.

`bootstrap()` takes every dependency as an argument (broker, ledger, Redis
client, bundle store), so tests pass real or in-memory ones; `serve()` runs an
instance until SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
import structlog
from faststream import AckPolicy
from faststream.redis import RedisBroker, StreamSub
from redis.exceptions import ResponseError

from contracts.registry import Registry, default_registry
from services.runtime.broker import Bus, make_broker
from services.runtime.consumer import Consumer, Delivery, Route
from services.runtime.health import serve_health
from services.runtime.ledger import Ledger, MemoryLedger, RedisLedger
from services.runtime.metrics import Metrics
from services.runtime.settings import RuntimeSettings

RECLAIM_SUFFIX = "~reclaim"


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

    @property
    def streams(self) -> list[str]:
        return [self.bus.stream_of(route.schema) for route in self.routes]

    async def prepare(self) -> None:
        """Create the consumer groups at the stream's start, so events published
        before this service first ran are still delivered to it."""
        if self.client is None:
            return
        for stream in self.streams:
            try:
                await self.client.xgroup_create(stream, self.name, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

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
            await asyncio.wait(unfinished, timeout=5)
        await self.broker.stop()
        if self.client is not None:
            await self.client.aclose()


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
    workers = {"max_workers": service.settings.max_concurrency} if service.settings.max_concurrency > 1 else {}
    service.broker.subscriber(
        stream=sub, ack_policy=AckPolicy.MANUAL, title=f"{stream}:{service.name}:{role}", **workers
    )(on_message)


def bootstrap(
    name: str,
    routes: Sequence[Route],
    *,
    settings: RuntimeSettings,
    broker: RedisBroker | None = None,
    client: aioredis.Redis | None = None,
    ledger: Ledger | None = None,
    registry: Registry | None = None,
    resources: dict[str, Any] | None = None,
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
        client = client or aioredis.Redis.from_url(settings.redis_url)
        ledger = ledger or RedisLedger(client, settings.stream_prefix)

    touch = None
    if client is not None:
        redis_client = client

        async def touch(stream: str, group: str, consumer: str, message_id: str) -> None:
            # XCLAIM to the same consumer with JUSTID resets the idle time
            # without counting a delivery: the lease heartbeat of a long step.
            await redis_client.xclaim(stream, group, consumer, min_idle_time=0, message_ids=[message_id], justid=True)

    consumer = Consumer(
        service=name,
        settings=settings,
        registry=registry or default_registry(),
        ledger=ledger,
        bus=bus,
        touch=touch,
        resources=resources,
        metrics=Metrics(name),
    )
    service = Service(name=name, settings=settings, broker=broker, bus=bus, consumer=consumer, routes=routes, client=client)
    for route in routes:
        stream = bus.stream_of(route.schema)
        reader = settings.instance
        reclaimer = settings.instance + RECLAIM_SUFFIX
        # One entry per read: a read batch would sit in this instance's pending
        # list unheartbeated, where its own reclaimer could take it.
        reader_sub = StreamSub(stream, group=name, consumer=reader, polling_interval=settings.read_block_ms, max_records=1)
        _subscriber_for(service, route, reader_sub, reader)
        _subscriber_for(
            service,
            route,
            StreamSub(
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


async def serve(service: Service) -> None:
    """Run until SIGTERM or SIGINT, then stop gracefully."""
    log = structlog.get_logger().bind(service=service.name, instance=service.settings.instance)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await service.start()
    health = await start_health(service)
    log.info("service started", streams=service.streams, health_port=service.settings.health_port or None)
    await stop.wait()
    log.info("stopping: no new work; in-flight work may finish", grace_s=service.settings.shutdown_grace_s)
    await service.stop()
    if health is not None:
        health.close()
        await health.wait_closed()
    log.info("service stopped")
