"""The health and metrics endpoint of a service instance, against a real Redis."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import cast

import httpx
import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from contracts.envelope import Event
from contracts.events import ProfileRequested
from services.runtime.delivery.consumer import Route, StepContext
from services.runtime.delivery.service import Service, bootstrap
from services.runtime.errors import StepFailed
from services.runtime.health.health import bound_port, serve_health
from services.runtime.health.healthcheck import main
from services.runtime.settings import RuntimeSettings
from tests.support.redis_server import free_port

SERVICE = "probe"
SCHEMA = "profile.requested"
HOLD = "hold-run-1"
FAIL = "fail-run-1"


def requested(run_id: str) -> Event:
    return ProfileRequested(run_id=run_id, producer="test", requested_by="test")


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample of the Prometheus text, or None when absent."""
    for family in text_string_to_metric_families(text):
        for item in family.samples:
            if item.name == name and all(item.labels.get(k) == v for k, v in labels.items()):
                return item.value
    return None


async def eventually(probe: Callable[[], Awaitable[object]], what: str, timeout_s: float = 15.0) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = await probe()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


@asynccontextmanager
async def endpoint(service: Service) -> AsyncIterator[httpx.AsyncClient]:
    server = await serve_health(service, 0, host="127.0.0.1", timeout_s=1.0)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{bound_port(server)}", timeout=10) as http:
            yield http
    finally:
        server.close()
        await server.wait_closed()


async def test_health_and_metrics_follow_the_group(settings: RuntimeSettings) -> None:
    release = asyncio.Event()

    async def handler(event, ctx: StepContext):
        if event.run_id == HOLD:
            await release.wait()
        if event.run_id == FAIL:
            raise StepFailed("the test's input is bad")
        return []

    service = bootstrap(SERVICE, [Route(SCHEMA, handler)], settings=settings)
    stream = service.bus.stream_of(SCHEMA)
    async with endpoint(service) as http:
        try:
            await service.broker.connect()
            before = await http.get("/health")
            assert before.status_code == 503
            assert "does not exist" in before.json()["reasons"][0]

            # Group created, three events waiting, nothing read yet: lag 3, healthy.
            await service.prepare()
            for i in range(3):
                await service.bus.publish(requested(f"ok-run-{i}"))
            waiting = await http.get("/health")
            assert waiting.status_code == 200, waiting.text
            body = waiting.json()
            assert (body["service"], body["instance"], body["redis_ok"], body["broker_ok"]) == (
                SERVICE, settings.instance, True, True,
            )
            assert [(s["stream"], s["lag"], s["pending"]) for s in body["streams"]] == [(stream, 3, 0)]
            text = (await http.get("/metrics")).text
            assert sample(text, "specdec_group_lag", service=SERVICE, stream=stream) == 3
            assert sample(text, "specdec_redis_up", service=SERVICE) == 1

            await service.start()

            async def consumed() -> float | None:
                text = (await http.get("/metrics")).text
                return sample(text, "specdec_events_consumed_total", service=SERVICE, schema=SCHEMA)

            await eventually(lambda: _equals(consumed, 3), "three events consumed")

            # A step in flight is pending in the group until it is acked.
            await service.bus.publish(requested(HOLD))

            async def held() -> bool:
                state = (await http.get("/health")).json()["streams"][0]
                return state["pending"] == 1 and state["lag"] == 0

            await eventually(held, "the held step to be pending")
            text = (await http.get("/metrics")).text
            assert sample(text, "specdec_group_pending", service=SERVICE, stream=stream) == 1
            # Held for longer than the smallest latency bucket, whatever the probes' speed.
            await asyncio.sleep(0.02)
            release.set()

            await service.bus.publish(requested(FAIL))
            await service.bus.publish_raw(stream, b"{not json", {"schema": SCHEMA}, "garbage-1")

            async def settled() -> str | None:
                text = (await http.get("/metrics")).text
                dead = sample(text, "specdec_events_dead_lettered_total", service=SERVICE, schema=SCHEMA)
                return text if dead == 1 and sample(text, "specdec_events_consumed_total", schema=SCHEMA) == 5 else None

            text = str(await eventually(settled, "the failed step and the dead letter"))
            assert sample(text, "specdec_events_failed_total", service=SERVICE, schema=SCHEMA, kind="step") == 1
            assert sample(text, "specdec_events_failed_total", kind="error") is None
            # The handler ran for the 3 + HOLD + FAIL deliveries; not for the dead letter.
            assert sample(text, "specdec_handler_seconds_count", service=SERVICE, schema=SCHEMA) == 5
            assert sample(text, "specdec_deliveries_total", schema=SCHEMA, outcome="dead_lettered") == 1
            # The held step took its time: at least one observation above the smallest bucket.
            fastest = sample(text, "specdec_handler_seconds_bucket", schema=SCHEMA, le="0.005")
            assert fastest is not None and fastest < 5

            final = await http.get("/health")
            assert final.status_code == 200
            assert [(s["lag"], s["pending"]) for s in final.json()["streams"]] == [(0, 0)]
            port = str(http.base_url.port)
            assert await asyncio.to_thread(main, ["check", "--port", port]) == 0
        finally:
            await service.stop(grace_s=1.0)


async def _equals(probe: Callable[[], Awaitable[object]], expected: object) -> bool:
    return await probe() == expected


async def test_unknown_lag_is_unhealthy_until_the_group_reads_past_it(settings: RuntimeSettings) -> None:
    async def handler(event, ctx):
        return []

    service = bootstrap(SERVICE, [Route(SCHEMA, handler)], settings=settings)
    stream = service.bus.stream_of(SCHEMA)
    async with endpoint(service) as http:
        try:
            await service.broker.connect()
            for i in range(3):
                await service.bus.publish(requested(f"ok-run-{i}"))
            # A deleted entry between the group's position and the end: Redis cannot count the lag.
            raw = aioredis.Redis.from_url(settings.redis_url)
            # redis-py types replies for decode_responses too; this client's are bytes
            entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", await raw.xrange(stream))
            await raw.xdel(stream, entries[1][0])
            await raw.aclose()
            await service.prepare()

            unknown = await http.get("/health")
            assert unknown.status_code == 503
            assert unknown.json()["streams"][0]["lag"] is None
            assert "cannot tell" in " ".join(unknown.json()["reasons"])

            await service.start()

            async def healthy() -> bool:
                return (await http.get("/health")).status_code == 200

            await eventually(healthy, "the lag to be known again")
        finally:
            await service.stop(grace_s=1.0)


async def test_unreachable_redis_is_503_with_the_reason(settings: RuntimeSettings) -> None:
    closed = settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"})

    async def handler(event, ctx):
        return []

    service = bootstrap(SERVICE, [Route(SCHEMA, handler)], settings=closed)
    try:
        async with endpoint(service) as http:
            started = time.monotonic()
            response = await http.get("/health")
            assert time.monotonic() - started < 5
            assert response.status_code == 503
            body = response.json()
            assert body["redis_ok"] is False and body["broker_ok"] is False
            assert "Redis did not answer" in " ".join(body["reasons"])
            assert body["redis_error"]

            text = (await http.get("/metrics")).text
            assert sample(text, "specdec_redis_up", service=SERVICE) == 0
            assert sample(text, "specdec_group_lag", service=SERVICE) is None

            assert (await http.get("/nowhere")).status_code == 404
            assert (await http.post("/health")).status_code == 405
            # The container health check command sees the same answer.
            assert await asyncio.to_thread(main, ["check", "--port", str(http.base_url.port)]) == 1
    finally:
        assert service.client is not None
        await service.client.aclose()
