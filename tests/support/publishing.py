"""Publish one event as a service publishes it (faststream's binary envelope, through the Bus).

For tests and benchmarks that need an event on its stream before a reading command runs:
the reading commands decode that envelope (services/runtime/delivery/wire.py), so a plain XADD of
JSON would not exercise them.
"""

from __future__ import annotations

import asyncio

from contracts.envelope import Event


def publish_event(redis_url: str, prefix: str, event: Event) -> None:
    """Publish `event` on `<prefix>.<schema>` through a broker of its own, then close it."""
    from services.runtime.delivery.broker import Bus, make_broker
    from services.runtime.settings import RuntimeSettings

    async def publish() -> None:
        broker = make_broker(RuntimeSettings(redis_url=redis_url, stream_prefix=prefix))
        await broker.connect()
        try:
            await Bus(broker, prefix).publish(event)
        finally:
            await broker.stop()

    asyncio.run(publish())
