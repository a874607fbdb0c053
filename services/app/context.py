"""What every use case that talks to Redis needs: settings, the bundle store, a Redis client, the bus."""

from __future__ import annotations

import asyncio
import getpass
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from services.runtime.backoff import dropped, sleeps
from services.runtime.bundle.bundle import BundleStore
from services.runtime.errors import BrokerUnavailable
from services.runtime.settings import RuntimeSettings

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from faststream.redis import RedisBroker

    from services.runtime.delivery.broker import Bus


def operator() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()}"


def approver_settings(settings: RuntimeSettings) -> RuntimeSettings:
    """The settings an approval is published with: the operator's Redis user (SPECDEC_OPERATOR_REDIS_URL),
    the only one allowed to write the approval stream; without one, SPECDEC_REDIS_URL's."""
    if settings.operator_redis_url:
        return settings.model_copy(update={"redis_url": settings.operator_redis_url, "redis_url_file": ""})
    return settings


Notice = Callable[[str], None]


def say(line: str) -> None:
    """The default `notice`: one line on stderr (stdout stays the command's output)."""
    sys.stderr.write(f"specdec: {line}\n")
    sys.stderr.flush()


# How long a command waits for Redis to answer before giving up: a restart or a failover
# takes seconds, and a reading command should ride it out instead of failing at once.
CONNECT_PATIENCE_S = 20.0
# Waits between attempts while Redis does not answer: doubling from FIRST to at most MAX.
FIRST_RETRY_S = 0.25
MAX_RETRY_S = 4.0


def backoff(first_s: float = FIRST_RETRY_S, max_s: float = MAX_RETRY_S) -> AsyncIterator[float]:
    """Sleeps first_s, 2 first_s, ... up to max_s each time it is stepped; yields each wait
    (services/runtime/backoff.py; `dropped` there says which errors are worth the wait)."""
    return sleeps(first_s, max_s)


class _BrokerOnFirstPublish:
    """faststream's broker, made and connected on the first publish.

    status, watch and dlq list never publish; faststream costs them ~0.2 s to
    import and a second Redis connection. Bus only calls `publish` on it.
    """

    def __init__(self, settings: RuntimeSettings) -> None:
        self._settings = settings
        self._broker: RedisBroker | None = None
        self._lock = asyncio.Lock()

    async def _connected(self) -> RedisBroker:
        async with self._lock:
            if self._broker is None:
                from services.runtime.delivery.broker import make_broker

                broker = make_broker(self._settings)
                await broker.connect()
                self._broker = broker
            return self._broker

    async def publish(self, *args: Any, **kwargs: Any) -> Any:
        return await (await self._connected()).publish(*args, **kwargs)

    async def stop(self) -> None:
        if self._broker is not None:
            await self._broker.stop()


class Session:
    """One call's connections (a CLI command, an MCP tool call); `bus` is made when first used."""

    def __init__(self, settings: RuntimeSettings, bundle: BundleStore, client: aioredis.Redis) -> None:
        self.settings = settings
        self.bundle = bundle
        self.client = client
        self._broker = _BrokerOnFirstPublish(settings)
        self._bus: Bus | None = None

    @property
    def bus(self) -> Bus:
        if self._bus is None:
            from services.runtime.delivery.broker import Bus

            self._bus = Bus(self._broker, self.settings.stream_prefix)  # type: ignore[arg-type]  # Bus only publishes
        return self._bus

    async def close(self) -> None:
        await self._broker.stop()


async def patiently(op: Callable[[], Any], *, notice: Notice = say, patience_s: float = CONNECT_PATIENCE_S,
                    what: str = "reading") -> Any:
    """`await op()`, repeated with backoff while Redis is away, for at most `patience_s`; one line says so.

    For reading use cases only (status, dlq list): a read repeated is harmless."""
    started = time.monotonic()
    waits = backoff()
    told = False
    while True:
        try:
            result = await op()
        except BaseException as exc:
            if not dropped(exc):
                raise
            if time.monotonic() - started >= patience_s:
                raise BrokerUnavailable(f"Redis did not answer within {patience_s:g} s while {what} ({exc}); "
                                        "check that it runs and SPECDEC_REDIS_URL") from None
            if not told:
                notice(f"lost Redis while {what} ({type(exc).__name__}: {exc}); retrying with backoff "
                       f"for up to {patience_s:g} s")
                told = True
            await anext(waits)
            continue
        if told:
            notice(f"Redis answers again after {time.monotonic() - started:.1f} s")
        return result


async def _ping(client: aioredis.Redis, settings: RuntimeSettings, notice: Notice, patience_s: float) -> None:
    """PING until Redis answers, with backoff, for at most `patience_s`; says so in one line."""
    started = time.monotonic()
    waits = backoff()
    told = False
    while True:
        try:
            await client.ping()
            if told:
                notice(f"Redis answers again after {time.monotonic() - started:.1f} s")
            return
        except BaseException as exc:
            if not dropped(exc):
                raise
            # Only here: the broker module loads the event models, which the reading commands never need.
            from services.runtime.delivery.broker import redacted_url

            where = redacted_url(settings.redis_url)
            if time.monotonic() - started >= patience_s:
                raise BrokerUnavailable(
                    f"Redis at {where} did not answer within {patience_s:g} s ({exc}); start one or set "
                    "SPECDEC_REDIS_URL"
                ) from None
            if not told:
                notice(f"Redis at {where} does not answer ({type(exc).__name__}: {exc}); retrying with backoff "
                       f"for up to {patience_s:g} s")
                told = True
            await anext(waits)


@asynccontextmanager
async def connect(settings: RuntimeSettings | None = None, *, notice: Notice = say,
                  patience_s: float = CONNECT_PATIENCE_S) -> AsyncIterator[Session]:
    """A session on the configured Redis, once it answers (waiting up to `patience_s` with backoff)."""
    import redis.asyncio as aioredis

    settings = settings or RuntimeSettings()
    client = aioredis.Redis.from_url(settings.redis_url)
    try:
        await _ping(client, settings, notice, patience_s)
    except BaseException:
        await client.aclose()
        raise
    session = Session(settings=settings, bundle=BundleStore(settings.bundle_root), client=client)
    try:
        yield session
    except BaseException as exc:
        from redis.exceptions import OutOfMemoryError

        if not isinstance(exc, OutOfMemoryError):
            raise
        # noeviction: Redis at its maxmemory refuses writes instead of evicting a stream (docs/deployment.md).
        raise BrokerUnavailable(
            "Redis refused the write: it is at its maxmemory (noeviction, nothing is evicted); check that the "
            "journal runs (it trims the streams) and every service consumes, then free memory or raise maxmemory "
            '(docs/deployment.md, "Redis memory")') from None
    finally:
        await session.close()
        await client.aclose()
