"""What every use case that talks to Redis needs: settings, the bundle store, a Redis client, the bus."""

from __future__ import annotations

import asyncio
import getpass
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from services.runtime.bundle import BundleStore
from services.runtime.errors import BrokerUnavailable
from services.runtime.settings import RuntimeSettings

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from faststream.redis import RedisBroker

    from services.runtime.broker import Bus


def operator() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()}"


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
                from services.runtime.broker import make_broker

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
            from services.runtime.broker import Bus

            self._bus = Bus(self._broker, self.settings.stream_prefix)  # type: ignore[arg-type]
        return self._bus

    async def close(self) -> None:
        await self._broker.stop()


@asynccontextmanager
async def connect(settings: RuntimeSettings | None = None) -> AsyncIterator[Session]:
    import redis.asyncio as aioredis

    settings = settings or RuntimeSettings()
    client = aioredis.Redis.from_url(settings.redis_url)
    try:
        await client.ping()
    except (aioredis.ConnectionError, OSError) as exc:
        await client.aclose()
        from services.runtime.broker import redacted_url

        raise BrokerUnavailable(
            f"Redis at {redacted_url(settings.redis_url)} did not answer ({exc}); "
            "start one or set SPECDEC_REDIS_URL"
        ) from None
    session = Session(settings=settings, bundle=BundleStore(settings.bundle_root), client=client)
    try:
        yield session
    finally:
        await session.close()
        await client.aclose()
