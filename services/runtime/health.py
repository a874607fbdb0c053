"""Health and Prometheus metrics of one service instance, over plain HTTP.

`serve_health(service, port)` starts a small asyncio HTTP/1.1 server (stdlib
only: two read-only routes need no framework) answering:

- `GET /health`: 200 when the broker connection answers PING and Redis reports
  the lag of this service's group on every stream it reads; 503 otherwise,
  with the reasons. The JSON body (`HealthReport`) names the service and
  instance, says whether Redis answered, and gives each stream's group lag,
  pending count and consumer count.
- `GET /metrics`: Prometheus text from a registry of this instance alone
  (`Metrics`): events consumed, failed and dead-lettered, handler latency,
  and the group's pending count and lag, read with XINFO GROUPS at scrape time
  so they are never stale.

`python -m services.runtime.health check --port N` exits 0 when the endpoint
on 127.0.0.1:N answers 200 (the container health check; no curl needed).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from pydantic import Field
from redis.exceptions import RedisError, ResponseError

from contracts.envelope import Strict
from services.runtime.errors import SpecdecError

if TYPE_CHECKING:
    from services.runtime.service import Service

HEALTH_VERSION = 1
# The outcomes `Consumer._handle` returns (services/runtime/consumer.py).
OUTCOMES = frozenset({"done", "failed_step", "duplicate", "deferred", "retry", "dead_lettered"})
# Outcomes that took the message off the group as processed (acked).
CONSUMED = frozenset({"done", "failed_step", "duplicate"})
# Outcomes for which the step's handler ran: the ones the latency histogram times.
HANDLER_RAN = frozenset({"done", "failed_step", "retry"})
# Steps last from milliseconds (gate, duplicates) to hours (training, serving).
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400)
MAX_REQUEST_BYTES = 16 * 1024


class GroupState(Strict):
    """This service's consumer group on one stream, as XINFO GROUPS reports it."""

    stream: str = Field(description="Stream name (<prefix>.<schema>).")
    group: str = Field(description="Consumer group (the service's name).")
    lag: int | None = Field(description="Entries not yet delivered to the group; null when Redis cannot tell.")
    pending: int | None = Field(description="Entries delivered but not acked (the group's PEL); null when unread.")
    consumers: int | None = Field(description="Consumers (readers and reclaimers) in the group; null when unread.")
    error: str | None = Field(default=None, description="Why the state could not be read, when it could not.")


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


class _GroupCollector:
    """Scrape-time gauges from the latest XINFO GROUPS snapshot.

    The endpoint refreshes `states` right before each scrape; a stream whose
    state could not be read has no sample (absent, never a stale value).
    """

    def __init__(self, service: str) -> None:
        self.service = service
        self.states: list[GroupState] = []
        self.redis_up: bool | None = None

    def collect(self) -> Iterable[Metric]:
        pending = GaugeMetricFamily(
            "specdec_group_pending", "Entries delivered to the group but not acked.", labels=["service", "stream"]
        )
        lag = GaugeMetricFamily(
            "specdec_group_lag", "Entries of the stream not yet delivered to the group.", labels=["service", "stream"]
        )
        for state in self.states:
            if state.pending is not None:
                pending.add_metric([self.service, state.stream], state.pending)
            if state.lag is not None:
                lag.add_metric([self.service, state.stream], state.lag)
        up = GaugeMetricFamily("specdec_redis_up", "1 when Redis answered at the last scrape.", labels=["service"])
        if self.redis_up is not None:
            up.add_metric([self.service], 1.0 if self.redis_up else 0.0)
        return [pending, lag, up]


class Metrics:
    """Counters and the latency histogram of one instance, in a registry of its own.

    `observe(schema, outcome, seconds)` is called by the consumer after each
    delivery. Counting rules (docs/deployment.md, "Metrics"):
    consumed = done, failed_step, duplicate (acked as processed);
    failed = failed_step (kind="step": the step emitted `<step>.failed`) and
    retry (kind="error": the handler raised, the message stays pending);
    dead_lettered = dead_lettered; the histogram times deliveries whose handler
    ran (done, failed_step, retry). Every delivery is also counted by outcome.
    """

    def __init__(self, service: str, registry: CollectorRegistry | None = None) -> None:
        self.service = service
        self.registry = registry or CollectorRegistry()
        labels = ["service", "schema"]
        self.consumed = Counter(
            "specdec_events_consumed", "Events handled and acked as processed.", labels, registry=self.registry
        )
        self.failed = Counter(
            "specdec_events_failed",
            "Deliveries whose step failed (kind=step) or whose handler raised (kind=error).",
            [*labels, "kind"],
            registry=self.registry,
        )
        self.dead_lettered = Counter(
            "specdec_events_dead_lettered", "Events moved to the dead-letter stream.", labels, registry=self.registry
        )
        self.handled = Counter(
            "specdec_deliveries", "Every delivery, by outcome.", [*labels, "outcome"], registry=self.registry
        )
        self.handler_seconds = Histogram(
            "specdec_handler_seconds",
            "Time to handle one delivery whose step handler ran.",
            labels,
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.groups = _GroupCollector(service)
        self.registry.register(self.groups)  # type: ignore[arg-type]

    def observe(self, schema: str, outcome: str, seconds: float) -> None:
        # An outcome this module does not know is still counted, under a bounded
        # label, so a new consumer outcome shows up instead of vanishing.
        label = outcome if outcome in OUTCOMES else "unknown"
        self.handled.labels(self.service, schema, label).inc()
        if label in CONSUMED:
            self.consumed.labels(self.service, schema).inc()
        if label == "failed_step":
            self.failed.labels(self.service, schema, "step").inc()
        elif label == "retry":
            self.failed.labels(self.service, schema, "error").inc()
        elif label == "dead_lettered":
            self.dead_lettered.labels(self.service, schema).inc()
        if label in HANDLER_RAN:
            self.handler_seconds.labels(self.service, schema).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}"


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class HealthEndpoint:
    """Builds /health and /metrics for one service; the HTTP layer is `serve_health`."""

    def __init__(self, service: Service, metrics: Metrics, *, timeout_s: float = 2.0) -> None:
        self.service = service
        self.metrics = metrics
        self.timeout_s = timeout_s

    @property
    def streams(self) -> list[str]:
        return list(dict.fromkeys(self.service.streams))

    async def _broker_ok(self) -> bool:
        return await self.service.broker.ping(timeout=self.timeout_s)

    async def _groups(self) -> tuple[str | None, list[GroupState]]:
        """(Redis error or None, one state per stream), in one pipelined round trip."""
        client = self.service.client
        group = self.service.name
        if client is None:
            return "no Redis client (an in-memory service has no groups to report)", []
        pipe = client.pipeline(transaction=False)
        pipe.ping()
        for stream in self.streams:
            pipe.xinfo_groups(stream)
        try:
            replies = await asyncio.wait_for(pipe.execute(raise_on_error=False), self.timeout_s)
        except (RedisError, OSError, TimeoutError) as exc:
            return _describe(exc), []
        if isinstance(replies[0], Exception):
            return _describe(replies[0]), []
        states = []
        for stream, reply in zip(self.streams, replies[1:], strict=True):
            states.append(_group_state(stream, group, reply))
        return None, states

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


def _group_state(stream: str, group: str, reply: object) -> GroupState:
    if isinstance(reply, ResponseError) and "no such key" in str(reply).lower():
        return GroupState(stream=stream, group=group, lag=None, pending=None, consumers=None,
                          error="the stream does not exist (the service creates it with its group when it starts)")
    if isinstance(reply, Exception):
        return GroupState(stream=stream, group=group, lag=None, pending=None, consumers=None, error=_describe(reply))
    for info in reply if isinstance(reply, list) else []:
        if _text(info.get("name")) == group:
            lag = info.get("lag")
            return GroupState(
                stream=stream,
                group=group,
                lag=None if lag is None else int(lag),
                pending=int(info.get("pending", 0)),
                consumers=int(info.get("consumers", 0)),
            )
    return GroupState(stream=stream, group=group, lag=None, pending=None, consumers=None,
                      error=f"group {group} does not exist on the stream (the service creates it when it starts)")


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
    service: Service,
    port: int,
    *,
    host: str = "0.0.0.0",  # noqa: S104 - containers are probed from outside
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


def check(port: int, host: str = "127.0.0.1", timeout_s: float = 5.0) -> tuple[bool, str]:
    """(healthy, what was seen) for the endpoint at host:port."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=timeout_s) as response:  # noqa: S310
            return response.status == 200, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return False, exc.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as exc:
        return False, f"no answer from {host}:{port}: {exc}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.runtime.health")
    sub = parser.add_subparsers(dest="command", required=True)
    probe = sub.add_parser("check", help="exit 0 when GET /health answers 200")
    probe.add_argument("--port", type=int, required=True, help="the instance's SPECDEC_HEALTH_PORT")
    probe.add_argument("--host", default="127.0.0.1")
    probe.add_argument("--timeout-s", type=float, default=5.0)
    args = parser.parse_args(argv)
    healthy, seen = check(args.port, args.host, args.timeout_s)
    if not healthy:
        print(seen, file=sys.stderr)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
