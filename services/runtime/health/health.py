"""The health endpoint of one service instance: /health and /metrics over plain HTTP (stdlib only).

Two read-only routes need no framework. What each answers is docs/deployment.md#health-and-metrics's;
every figure is read at scrape time, so it is never stale. The counters live in metrics.py, the
container's probe in healthcheck.py.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final, Literal, Protocol

from prometheus_client.exposition import CONTENT_TYPE_LATEST
from pydantic import Field
from redis.exceptions import RedisError, ResponseError

from contracts.envelope import Strict
from contracts.streams import deadletter_stream
from services.runtime.errors import SpecdecError
from services.runtime.health.metrics import GroupState, Metrics

HEALTH_VERSION: Final = 1
MAX_REQUEST_BYTES = 16 * 1024


class Probed(Protocol):
    """What the endpoint reads of a service instance (services.runtime.delivery.service.Service has it all).

    A protocol, not the Service class: the service module starts the endpoint,
    so the endpoint must not import it back.
    """

    name: str
    settings: Any
    broker: Any
    client: Any
    consumer: Any

    @property
    def streams(self) -> list[str]: ...


class HealthReport(Strict):
    """The body of GET /health."""

    version: Literal[1] = Field(default=HEALTH_VERSION, description="Format version of this report.")
    service: str = Field(description="Service name (also its consumer group).")
    instance: str = Field(description="This instance's consumer name.")
    ok: bool = Field(description="True when the broker answers and every group's lag is known (HTTP 200).")
    broker_ok: bool = Field(description="The broker's connection answered PING.")
    redis_ok: bool = Field(description="The Redis client answered PING (the ledger's connection).")
    redis_error: str | None = Field(description="The error of the Redis client, when it failed.")
    streams: list[GroupState] = Field(description="One entry per stream this service reads.")
    reasons: list[str] = Field(description="Why the instance is not healthy; empty when ok.")


class HealthError(SpecdecError):
    """The health endpoint cannot be served (for example the port is taken)."""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}"


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class HealthEndpoint:
    """Builds /health and /metrics for one service; the HTTP layer is `serve_health`."""

    def __init__(self, service: Probed, metrics: Metrics, *, timeout_s: float = 2.0) -> None:
        self.service = service
        self.metrics = metrics
        self.timeout_s = timeout_s

    @property
    def streams(self) -> list[str]:
        return list(dict.fromkeys(self.service.streams))

    async def _broker_ok(self) -> bool:
        ok: bool = await self.service.broker.ping(timeout=self.timeout_s)
        return ok

    async def _groups(self) -> tuple[str | None, list[GroupState]]:
        """(Redis error or None, one state per stream); the dead-letter count goes to the metrics."""
        client = self.service.client
        group = self.service.name
        self.metrics.groups.deadletter_entries = None  # absent unless read now: never a stale value
        if client is None:
            return "no Redis client (an in-memory service has no groups to report)", []
        streams = self.streams
        pipe = client.pipeline(transaction=False)
        pipe.ping()
        pipe.time()
        pipe.xlen(deadletter_stream(self.service.settings.stream_prefix))
        for stream in streams:
            pipe.xinfo_groups(stream)
            # The oldest pending entry nobody has touched for a reclaim idle time: abandoned,
            # not running (a running step's heartbeat keeps its idle time low).
            pipe.xpending_range(stream, group, min="-", max="+", count=1, idle=self.service.settings.reclaim_idle_ms)
        try:
            replies = await asyncio.wait_for(pipe.execute(raise_on_error=False), self.timeout_s)
        except (RedisError, OSError, TimeoutError) as exc:
            return _describe(exc), []
        if isinstance(replies[0], Exception):
            return _describe(replies[0]), []
        now_ms = _now_ms(replies[1])
        self.metrics.groups.deadletter_entries = replies[2] if isinstance(replies[2], int) else None
        states = []
        firsts: dict[str, str] = {}  # stream -> the group's last delivered ID, where entries wait undelivered
        for index, stream in enumerate(streams):
            info, pending = replies[3 + 2 * index], replies[4 + 2 * index]
            state, last_delivered = _group_state(stream, group, info)
            if state.error is None and now_ms is not None and not isinstance(pending, Exception):
                age_s = _age_s(pending[0]["message_id"], now_ms) if pending else 0.0
                state = state.model_copy(update={"oldest_waiting_age_s": age_s})
                if state.lag != 0 and last_delivered is not None:
                    firsts[stream] = last_delivered
            states.append(state)
        if firsts and now_ms is not None:
            states = await self._undelivered(states, firsts, now_ms)
        return None, states

    async def _undelivered(self, states: list[GroupState], firsts: dict[str, str], now_ms: int) -> list[GroupState]:
        """Fold the age of each stream's first undelivered entry (the one after the group's last
        delivered ID) into its oldest waiting age: a second round trip, only where entries wait."""
        pipe = self.service.client.pipeline(transaction=False)
        for stream, last in firsts.items():
            pipe.xrange(stream, min=f"({last}", max="+", count=1)
        try:
            replies = await asyncio.wait_for(pipe.execute(raise_on_error=False), self.timeout_s)
        except (RedisError, OSError, TimeoutError):
            return states  # the first round trip's figures stand; the next scrape tries again
        first_ids = {stream: reply[0][0] for stream, reply in zip(firsts, replies, strict=True)
                     if isinstance(reply, list) and reply}
        updated = []
        for state in states:
            if state.stream in first_ids and state.oldest_waiting_age_s is not None:
                age_s = max(state.oldest_waiting_age_s, _age_s(first_ids[state.stream], now_ms))
                state = state.model_copy(update={"oldest_waiting_age_s": age_s})
            updated.append(state)
        return updated

    async def check(self) -> HealthReport:
        broker_ok, (redis_error, states) = await asyncio.gather(self._broker_ok(), self._groups())
        reasons = []
        if not broker_ok:
            reasons.append(f"the broker connection did not answer PING within {self.timeout_s:g} s")
        if redis_error is not None:
            reasons.append(f"Redis did not answer: {redis_error}")
        for state in states:
            if state.error is not None:
                reasons.append(f"{state.stream}: {state.error}")
            elif state.lag is None:
                reasons.append(
                    f"{state.stream}: Redis cannot tell group {state.group}'s lag (entries were deleted or "
                    "trimmed past the group's position); it is known again once the group reads past them"
                )
        self.metrics.groups.states = states
        self.metrics.groups.redis_up = redis_error is None
        return HealthReport(
            service=self.service.name,
            instance=self.service.settings.instance,
            ok=not reasons,
            broker_ok=broker_ok,
            redis_ok=redis_error is None,
            redis_error=redis_error,
            streams=states,
            reasons=reasons,
        )

    async def scrape(self) -> bytes:
        """Prometheus text; the group gauges are read from Redis first."""
        redis_error, states = await self._groups()
        self.metrics.groups.states = states
        self.metrics.groups.redis_up = redis_error is None
        return self.metrics.render()

    async def respond(self, method: str, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) of one request."""
        if path not in ("/health", "/metrics"):
            return 404, "text/plain; charset=utf-8", b"not found; try /health or /metrics\n"
        if method not in ("GET", "HEAD"):
            return 405, "text/plain; charset=utf-8", b"only GET and HEAD\n"
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, await self.scrape()
        report = await self.check()
        return (200 if report.ok else 503), "application/json", report.model_dump_json().encode()


def _now_ms(reply: object) -> int | None:
    """Redis's clock (TIME: seconds, microseconds) in ms: entry IDs carry the time of the
    Redis that wrote them, so ages are taken on its clock, not this host's."""
    if isinstance(reply, tuple | list) and len(reply) == 2:
        return int(reply[0]) * 1000 + int(reply[1]) // 1000
    return None


def _age_s(entry_id: object, now_ms: int) -> float:
    """Seconds since the entry ID's time (`<ms>-<seq>`)."""
    return max(0.0, (now_ms - int(_text(entry_id).split("-", 1)[0])) / 1000)


def _group_state(stream: str, group: str, reply: object) -> tuple[GroupState, str | None]:
    """The group's state on the stream, and its last delivered ID (None when unknown)."""
    if isinstance(reply, ResponseError) and "no such key" in str(reply).lower():
        return GroupState(
            stream=stream,
            group=group,
            lag=None,
            pending=None,
            consumers=None,
            error="the stream does not exist (the service creates it with its group when it starts)",
        ), None
    if isinstance(reply, Exception):
        return GroupState(
            stream=stream, group=group, lag=None, pending=None, consumers=None, error=_describe(reply)
        ), None
    for info in reply if isinstance(reply, list) else []:
        if _text(info.get("name")) == group:
            lag = info.get("lag")
            last = info.get("last-delivered-id")
            return GroupState(
                stream=stream,
                group=group,
                lag=None if lag is None else int(lag),
                pending=int(info.get("pending", 0)),
                consumers=int(info.get("consumers", 0)),
            ), None if last is None else _text(last)
    return GroupState(stream=stream, group=group, lag=None, pending=None, consumers=None,
                      error=f"group {group} does not exist on the stream (the service creates it when it starts)"), None


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


async def _serve_connection(
    endpoint: HealthEndpoint, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """One request per connection (Connection: close): scrapers and probes need no more."""
    try:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), endpoint.timeout_s + 3)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            return
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            status, ctype, body = 400, "text/plain; charset=utf-8", b"bad request line\n"
            method = "GET"
        else:
            method = parts[0]
            status, ctype, body = await endpoint.respond(method, parts[1].split("?", 1)[0])
        header = (
            f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode("latin-1")
        writer.write(header if method == "HEAD" else header + body)
        await writer.drain()
    except ConnectionError:
        return  # the client went away; nothing to answer
    finally:
        writer.close()


async def serve_health(
    service: Probed,
    port: int,
    *,
    host: str = "0.0.0.0",  # containers are probed from outside
    timeout_s: float = 2.0,
) -> asyncio.Server:
    """Serve /health and /metrics for `service` on host:port until the returned server is closed.

    The counters are the consumer's `metrics`; a consumer built without any
    gets a `Metrics` here, so the endpoint never serves counters that nothing
    increments. Port 0 binds a free port (`bound_port(server)` tells which);
    whether to serve at all is the caller's choice (SPECDEC_HEALTH_PORT=0: off).
    """
    chosen = service.consumer.metrics
    if chosen is None:
        chosen = Metrics(service.name)
        service.consumer.metrics = chosen
    if not isinstance(chosen, Metrics):
        raise HealthError(f"the consumer of {service.name} counts into {type(chosen).__name__}, not health.Metrics")
    endpoint = HealthEndpoint(service, chosen, timeout_s=timeout_s)

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _serve_connection(endpoint, reader, writer)

    try:
        return await asyncio.start_server(on_connect, host, port, limit=MAX_REQUEST_BYTES)
    except OSError as exc:
        raise HealthError(
            f"cannot serve health on {host}:{port} ({exc.strerror or exc}); set SPECDEC_HEALTH_PORT to a free port, "
            "or 0 to turn the endpoint off"
        ) from exc


def bound_port(server: asyncio.Server) -> int:
    return int(server.sockets[0].getsockname()[1])
