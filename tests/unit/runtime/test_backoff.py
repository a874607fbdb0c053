"""The one Redis backoff (services/runtime/backoff.py): doubling waits up to a cap, and which errors are worth them."""

from __future__ import annotations

import asyncio
from itertools import islice

import pytest
from redis import exceptions as redis_errors

from services.runtime.backoff import delays, dropped, sleeps


def test_the_waits_double_from_the_first_up_to_the_cap_and_stay_there():
    assert list(islice(delays(0.25, 4.0), 8)) == pytest.approx([0.25, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0])
    assert list(islice(delays(0.1, 5.0), 9)) == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0])


def test_each_step_sleeps_its_wait_before_it_yields_it():
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def three() -> list[float]:
        waits = sleeps(1.0, 3.0, sleep=sleep)
        return [await anext(waits) for _ in range(3)]

    assert asyncio.run(three()) == [1.0, 2.0, 3.0]
    assert slept == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("exc", [
    redis_errors.ConnectionError("Error 111 connecting to 127.0.0.1:6379"),
    redis_errors.TimeoutError("timed out"),
    ConnectionRefusedError(111, "Connection refused"),
    OSError("network unreachable"),
])
def test_redis_being_away_is_worth_waiting_for(exc: BaseException):
    assert dropped(exc)


@pytest.mark.parametrize("exc", [
    redis_errors.AuthenticationError("invalid password"),  # a ConnectionError to redis-py, but waiting cannot heal it
    redis_errors.ResponseError("WRONGTYPE"),
    ValueError("a bug"),
    asyncio.CancelledError(),
])
def test_anything_else_is_not(exc: BaseException):
    assert not dropped(exc)
