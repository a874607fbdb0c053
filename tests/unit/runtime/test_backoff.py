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


class _Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict]] = []

    def warning(self, line: str, **fields) -> None:
        self.lines.append((line, fields))

    info = warning


def test_a_read_loop_waits_0_1_s_doubling_to_2_s_per_stream(monkeypatch):
    from services.runtime.delivery import groups

    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(groups.asyncio, "sleep", sleep)
    keeper = groups.GroupKeeper(client=None, group="g", log=_Log())

    async def outage() -> None:
        for _ in range(7):
            await keeper.dropped("a", redis_errors.ConnectionError("gone"))
        await keeper.dropped("b", redis_errors.ConnectionError("gone"))

    asyncio.run(outage())
    assert slept == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 0.1])


def test_a_start_that_loses_redis_starts_again_after_0_5_s_doubling_to_5_s(monkeypatch):
    from services.runtime.delivery import service

    class Broker:
        async def stop(self) -> None:
            pass

    class Service:
        def __init__(self, failures: int) -> None:
            self.failures = failures
            self.consumer = type("Consumer", (), {"accepting": True})()
            self.broker = Broker()

        async def start(self) -> None:
            if self.failures:
                self.failures -= 1
                raise redis_errors.ConnectionError("gone")

    waited: list[float] = []

    async def wait_for(awaitable, timeout: float):
        awaitable.close()
        waited.append(timeout)
        raise TimeoutError

    monkeypatch.setattr(service.asyncio, "wait_for", wait_for)
    log = _Log()
    assert asyncio.run(service.start_riding_out(Service(6), asyncio.Event(), log)) is True
    assert waited == pytest.approx([0.5, 1.0, 2.0, 4.0, 5.0, 5.0])
    assert [fields["retry_in_s"] for _, fields in log.lines] == waited
