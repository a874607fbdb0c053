"""Broker factory and the one publisher of events (stream names and headers live here)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from contracts.catalogue import deadletter_stream, stream_name
from contracts.envelope import Event

# Re-exported (`as`): the services read entries through it.
from services.runtime.delivery.wire import decode_entry as decode_entry
from services.runtime.settings import RuntimeSettings

if TYPE_CHECKING:  # faststream loads when a broker is made: the CLI's read-only commands never make one
    from faststream.redis import RedisBroker


def redacted_url(url: str) -> str:
    """The URL without its password, for logs and error messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.hostname or ""
    if parts.username:
        netloc = f"{parts.username}:***@{netloc}"
    else:
        netloc = f":***@{netloc}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


# How long a command may wait for Redis's reply beyond its own blocking time
# (redis-py's default socket timeout).
SOCKET_TIMEOUT_S = 5.0


def make_broker(settings: RuntimeSettings) -> RedisBroker:
    """A broker for the configured Redis (redis:// or rediss://, password in the URL).

    Nothing connects here: `await broker.connect()` (or starting it) does.
    faststream's own per-message log lines go to DEBUG; specdec logs its own.
    """
    if not settings.redis_url.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(
            f"SPECDEC_REDIS_URL must start with redis://, rediss:// or unix://, not {redacted_url(settings.redis_url)}"
        )
    from faststream.redis import RedisBroker

    return RedisBroker(
        settings.redis_url,
        # A reader's XREADGROUP waits up to SPECDEC_READ_BLOCK_MS for an entry:
        # the socket must outwait it, or an idle reader fails with a read timeout.
        socket_timeout=SOCKET_TIMEOUT_S + settings.read_block_ms / 1000,
        apply_types=False,
        log_level=logging.DEBUG,
        logger=logging.getLogger("specdec.faststream"),
    )


def event_headers(event: Event) -> dict[str, str]:
    # schema and run_id travel as headers too, so `redis-cli XRANGE` shows them
    # beside the JSON body (faststream's binary envelope keeps headers readable).
    return {
        "schema": event.SCHEMA,
        "version": str(event.VERSION),
        "run_id": event.run_id,
        "event_id": event.event_id,
        "content-type": "application/json",
    }


class Bus:
    """Publishes events onto `<prefix>.<schema>`, and raw records onto the dead-letter stream."""

    def __init__(self, broker: RedisBroker, prefix: str) -> None:
        self.broker = broker
        self.prefix = prefix

    def stream_of(self, schema: str) -> str:
        return stream_name(self.prefix, schema)

    @property
    def deadletter(self) -> str:
        return deadletter_stream(self.prefix)

    async def publish(self, event: Event, *, maxlen: int | None = None) -> None:
        """XADD the event onto its stream; `maxlen` caps the stream there (`MAXLEN ~`: progress only)."""
        await self.broker.publish(
            event.to_json(),
            stream=self.stream_of(event.SCHEMA),
            headers=event_headers(event),
            correlation_id=event.event_id,
            maxlen=maxlen,
        )

    async def publish_raw(self, stream: str, body: bytes, headers: dict[str, str], correlation_id: str) -> None:
        await self.broker.publish(body, stream=stream, headers=headers, correlation_id=correlation_id)

