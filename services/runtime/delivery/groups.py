"""The read loops' consumer groups: kept alive across a Redis that lost them, and through an outage.

`GroupKeeper` wraps each fetch of a subscriber's read loop (services/runtime/delivery/service.py):
it recreates a group that vanished (NOGROUP, UNBLOCKED) and logs a dropped Redis once per
outage, backing the read loops off until Redis answers. What a fetched entry then goes
through is services/runtime/delivery/consumer.py's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from services.runtime.backoff import delays

if TYPE_CHECKING:
    import redis.asyncio as aioredis


# A read loop's backoff while Redis does not answer: 0.1 s doubling to 2 s.
READ_RETRY_S = 0.1
READ_RETRY_MAX_S = 2.0
# A dropped connection within this many seconds of Redis answering again is a stale pooled one.
STALE_WINDOW_S = 5.0
# Groups recreated within this many seconds of the last one went with the same reset: not warned again.
RECOVERY_QUIET_S = 30.0


def group_lost(exc: BaseException) -> bool:
    """Whether a read's error says the consumer group may be gone: NOGROUP (no group, or no
    stream at all), or UNBLOCKED (Redis 7's answer to an XREADGROUP blocked on a stream that
    was deleted meanwhile, e.g. by FLUSHALL)."""
    return isinstance(exc, ResponseError) and str(exc).startswith(("NOGROUP", "UNBLOCKED"))


class GroupKeeper:
    """Creates a service's consumer group on each stream it reads, and creates it again when it vanished.

    Redis is the transport, not the record (docs/design.md#redis-is-the-transport-the-bundle-is-the-record): it
    may restart empty, fail over to a replica that lagged, or be flushed, and a stream deleted meanwhile is
    recreated, without its group, by the next publish. Every read of the group then
    fails with NOGROUP and nothing is consumed again until the group is back. The
    group is recreated at ID 0, so the entries the new stream already holds are read.
    """

    def __init__(self, client: aioredis.Redis, group: str, log: Any) -> None:
        self.client = client
        self.group = group
        self.log = log
        # Told when a group had to be recreated: Redis lost its state, and with it every
        # lease (services/runtime/delivery/reconcile.py waits before cleaning anything).
        self.on_reset: Callable[[str], None] | None = None
        # A dropped connection: when it was first seen (None while Redis answers) and each
        # stream's next wait. One line when Redis goes and one when it is back, for all of
        # this instance's read loops together (faststream alone logs a traceback per fetch).
        self.lost_since: float | None = None
        self._recovered_at: float | None = None  # when a group was last recreated
        self._back_at: float | None = None  # when Redis last answered again after an outage
        self._waits: dict[str, Iterator[float]] = {}

    async def ensure(self, stream: str) -> bool:
        """XGROUP CREATE <stream> <group> 0 MKSTREAM; False when the group is already there."""
        try:
            await self.client.xgroup_create(stream, self.group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
            return False
        return True

    async def recover(self, stream: str, error: ResponseError) -> None:
        """Recreate the group after a read found it gone. One warning per loss: the
        stream's other subscribers (and other instances) that hit the same NOGROUP
        find the group already recreated (BUSYGROUP) and go on reading silently."""
        if await self.ensure(stream):
            # One warning per reset: the service's other streams, whose groups went with the
            # same reset, follow within seconds and are logged at debug level.
            now = time.monotonic()
            quiet = self._recovered_at is not None and now - self._recovered_at < RECOVERY_QUIET_S
            self._recovered_at = now
            (self.log.debug if quiet else self.log.warning)(
                "consumer group vanished (Redis restarted empty, failed over or was flushed, or the stream was "
                "recreated); recreated it, reading the stream from its start (and each other stream's group "
                "that went with it)",
                stream=stream, group=self.group, error=str(error),
            )
            if self.on_reset is not None:
                self.on_reset(f"consumer group {self.group} on {stream} vanished")

    def guard(self, read: Callable[..., Awaitable[Any]], stream: str) -> Callable[..., Awaitable[Any]]:
        """`read` (one fetch of a subscriber's read loop), recreating the group when it is gone.

        The fetch then returns nothing and the loop reads again, now from the recreated
        group. Any other error goes on to the loop as before (a dropped connection is
        logged and retried there).
        """

        async def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                got = await read(*args, **kwargs)
            except ResponseError as exc:
                if not group_lost(exc):
                    raise
                await self.answered()
                await self.recover(stream, exc)
                return None
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                await self.dropped(stream, exc)
                return None
            await self.answered()
            self._waits.pop(stream, None)
            return got

        return guarded

    async def dropped(self, stream: str, exc: BaseException) -> None:
        """A read found Redis gone: say so once (for every read loop of the instance), then wait
        this stream's backoff (READ_RETRY_S doubling to READ_RETRY_MAX_S) before the loop reads again."""
        now = time.monotonic()
        if self.lost_since is None and self._back_at is not None and now - self._back_at < STALE_WINDOW_S:
            # Right after Redis came back, a pooled connection opened before the outage fails once
            # on its first use: the next read opens a new one. Not a new outage.
            await asyncio.sleep(READ_RETRY_S)
            return
        if self.lost_since is None:
            self.lost_since = now
            self.log.warning("lost Redis; every read retries with backoff until it answers",
                             error=f"{type(exc).__name__}: {exc}", max_wait_s=READ_RETRY_MAX_S)
        waits = self._waits.get(stream)
        if waits is None:
            waits = self._waits[stream] = delays(READ_RETRY_S, READ_RETRY_MAX_S)
        await asyncio.sleep(next(waits))

    async def answered(self) -> None:
        """A read returned: once Redis answers a PING too (a fetch may return without asking Redis,
        a reclaimer between its polls), the line that says it is back, once per outage."""
        if self.lost_since is None:
            return
        try:
            await self.client.ping()
        except (RedisConnectionError, RedisTimeoutError, OSError):
            return
        if self.lost_since is not None:
            self.log.warning("Redis answers again; reading on", after_s=round(time.monotonic() - self.lost_since, 1))
            self.lost_since = None
            self._back_at = time.monotonic()
