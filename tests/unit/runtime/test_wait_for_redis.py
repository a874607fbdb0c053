"""A service started while Redis is down waits for it (services/runtime/main.py), with a scripted clock."""

from __future__ import annotations

import asyncio

import pytest
from redis import exceptions as redis_errors

from services.runtime.main import MAX_RETRY_S, wait_for_redis


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict]] = []

    def warning(self, event: str, **fields: object) -> None:
        self.lines.append((event, fields))


def scripted_ping(failures: list[Exception]):
    calls = []

    async def ping() -> bool:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return True

    return ping, calls


def test_it_retries_with_doubling_capped_backoff_until_redis_answers():
    refused = [redis_errors.ConnectionError("Error 111 connecting to 127.0.0.1:6379")] * 8
    ping, calls = scripted_ping(list(refused) + [redis_errors.TimeoutError("timed out")])
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    log = Log()
    failures = asyncio.run(wait_for_redis(ping, log, sleep=sleep))
    assert failures == 9 and len(calls) == 10
    assert slept == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 3.2, MAX_RETRY_S, MAX_RETRY_S, MAX_RETRY_S])
    assert [event for event, _ in log.lines] == ["waiting for Redis"] * 9
    assert log.lines[0][1]["attempt"] == 1 and "Error 111" in str(log.lines[0][1]["error"])


def test_an_answering_redis_costs_one_ping_and_no_wait():
    ping, calls = scripted_ping([])
    log = Log()

    async def no_sleep(seconds: float) -> None:
        raise AssertionError("must not wait")

    assert asyncio.run(wait_for_redis(ping, log, sleep=no_sleep)) == 0
    assert calls == [1] and log.lines == []


def test_an_error_that_is_not_a_connection_problem_is_not_retried():
    ping, _ = scripted_ping([redis_errors.AuthenticationError("invalid password")])
    with pytest.raises(redis_errors.AuthenticationError):
        asyncio.run(wait_for_redis(ping, Log()))
