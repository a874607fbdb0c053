"""Waiting for Redis to answer again: the doubling waits, and which errors waiting can heal.

One rule for a service that starts while Redis is away (services/runtime/main.py), or that loses it while
its subscribers start (services/runtime/delivery/service.py) or while its read loops read
(services/runtime/delivery/groups.py), and for a command that connects or reads through a restart
(services/app/context.py, services/app/runs/streams.py); each passes its own first and longest wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator


def delays(first_s: float, max_s: float) -> Iterator[float]:
    """first_s, 2 first_s, 4 first_s, ... up to max_s, then max_s without end."""
    wait_s = first_s
    while True:
        yield wait_s
        wait_s = min(wait_s * 2, max_s)


async def sleeps(first_s: float, max_s: float, *,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> AsyncIterator[float]:
    """Sleeps the next of `delays(first_s, max_s)` each time it is stepped; yields each wait."""
    for wait_s in delays(first_s, max_s):
        await sleep(wait_s)
        yield wait_s


def dropped(exc: BaseException) -> bool:
    """Whether an error is Redis being away (restart, failover, network), which waiting can heal."""
    # Imported on first use: importing this module (or services/app/context.py) does not load redis.
    from redis.exceptions import AuthenticationError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    if isinstance(exc, AuthenticationError):
        return False  # a wrong password does not heal by waiting (redis-py files it under ConnectionError)
    return isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError)
