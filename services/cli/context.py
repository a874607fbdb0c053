"""What every CLI command needs: settings, the bundle store, a Redis client, the bus."""

from __future__ import annotations

import getpass
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import redis.asyncio as aioredis

from services.runtime.broker import Bus, make_broker, redacted_url
from services.runtime.bundle import BundleStore
from services.runtime.errors import BrokerUnavailable
from services.runtime.settings import RuntimeSettings


def operator() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()}"


@dataclass
class Cli:
    settings: RuntimeSettings
    bundle: BundleStore
    client: aioredis.Redis
    bus: Bus


@asynccontextmanager
async def connect(settings: RuntimeSettings | None = None) -> AsyncIterator[Cli]:
    settings = settings or RuntimeSettings()
    client = aioredis.Redis.from_url(settings.redis_url)
    try:
        await client.ping()
    except (aioredis.ConnectionError, OSError) as exc:
        await client.aclose()
        raise BrokerUnavailable(
            f"Redis at {redacted_url(settings.redis_url)} did not answer ({exc}); "
            "start one or set SPECDEC_REDIS_URL"
        ) from None
    broker = make_broker(settings)
    await broker.connect()
    try:
        yield Cli(settings=settings, bundle=BundleStore(settings.bundle_root), client=client, bus=Bus(broker, settings.stream_prefix))
    finally:
        await broker.stop()
        await client.aclose()
