"""No inert settings: every RuntimeSettings field changes what a service does.

For each field, a probe builds the observable behaviour from a base settings
object and from one where only that field changed; the two must differ. A new
field without a probe fails `test_every_field_has_a_probe`.
"""

from __future__ import annotations

import asyncio
import io
import os
import tempfile
from collections.abc import Callable
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

import certifi
import pytest

from contracts.events import ProfileRequested
from services.journal.trim import trim_arguments
from services.runtime.delivery.consumer import Consumer
from services.runtime.delivery.ledger import MemoryLedger
from services.runtime.delivery.route import Route
from services.runtime.delivery.service import bootstrap
from services.runtime.health import logs
from services.runtime.main import resources_for
from services.runtime.settings import RuntimeSettings

BASE = RuntimeSettings(instance="base", redis_url="redis://127.0.0.1:6379/0")


async def _noop(event, ctx):
    return []


def _subscribers(settings: RuntimeSettings) -> list[tuple[Any, ...]]:
    service = bootstrap("svc", [Route("profile.requested", _noop)], settings=settings, in_memory=True)
    subs = []
    for sub in service.broker.subscribers:
        cfg = sub.stream_sub  # type: ignore[attr-defined]  # a Redis stream subscriber: every route reads a stream
        subs.append((cfg.name, cfg.group, cfg.consumer, cfg.polling_interval, cfg.min_idle_time))
    return sorted(subs, key=str)


def _client_target(settings: RuntimeSettings) -> tuple[Any, ...]:
    service = bootstrap("svc", [], settings=settings)
    kwargs = service.client.connection_pool.connection_kwargs  # type: ignore[union-attr]  # not in memory: a client
    return (kwargs.get("host"), kwargs.get("port"), kwargs.get("db"), kwargs.get("password"))


class _Bus:
    def __init__(self) -> None:
        self.raw: list[str] = []
        self.deadletter = "dlq"

    async def publish(self, event) -> None:
        pass

    async def publish_raw(self, stream, body, headers, correlation_id) -> None:
        self.raw.append(stream)


class _Delivery:
    def __init__(self, count: int) -> None:
        self.count = count
        self.acked = False
        self.stream = "s.profile.requested"
        self.consumer = "c"
        self.message_id = "1-0"
        self.body = ProfileRequested(run_id="toy-run-1", producer="t", requested_by="t").to_json()

    async def delivery_count(self) -> int:
        return self.count

    async def ack(self) -> None:
        self.acked = True


def _dead_letters_at_delivery_6(settings: RuntimeSettings) -> bool:
    bus = _Bus()
    consumer = Consumer(service="svc", settings=settings, registry=__import__("contracts").default_registry(),
                        ledger=MemoryLedger(), bus=bus)  # type: ignore[arg-type]  # a fake bus
    asyncio.run(consumer.handle(Route("profile.requested", _noop), _Delivery(6)))  # type: ignore[arg-type]  # a fake delivery
    return bus.raw == ["dlq"]


def _lease(settings: RuntimeSettings) -> tuple[int, float]:
    consumer = bootstrap("svc", [], settings=settings, in_memory=True).consumer
    return consumer.lease_ttl_ms, settings.heartbeat_s


def _grace_waited_s(settings: RuntimeSettings) -> float:
    service = bootstrap("svc", [], settings=settings, in_memory=True)

    async def go() -> float:
        task = asyncio.create_task(asyncio.sleep(5))
        service.consumer.in_flight.add(task)
        loop = asyncio.get_running_loop()
        start = loop.time()
        await service.stop()
        return round(loop.time() - start, 1)

    return asyncio.run(go())


def _debug_logged(settings: RuntimeSettings) -> bool:
    buffer = io.StringIO()
    with redirect_stderr(buffer):
        logs.configure("svc", settings.log_level).debug("probe line")
    logs.configure("svc", "info")
    return "probe line" in buffer.getvalue()


def _health_endpoint(settings: RuntimeSettings) -> int | None:
    from services.runtime.delivery.service import start_health
    from services.runtime.health.health import bound_port

    service = bootstrap("svc", [], settings=settings, in_memory=True)

    async def go() -> int | None:
        server = await start_health(service)
        if server is None:
            return None
        port = bound_port(server)  # type: ignore[arg-type]  # start_health's server is an asyncio.Server
        server.close()
        await server.wait_closed()
        return port

    return asyncio.run(go())


_TOKEN_FILE = Path(tempfile.gettempdir()) / f"specdec-guard-publish-token-{os.getpid()}"


def _publish_authorization(settings: RuntimeSettings) -> str | None:
    """The Authorization header a live https:// publish would send (None: no token)."""
    from services.publisher.publish.credentials import read_token, token_source

    source = token_source(settings)
    if source is None:
        return None
    if source.kind == "file":
        _TOKEN_FILE.write_text("guard-file-token\n")
    return read_token(source, environ={"SPECDEC_GUARD_PUBLISH_TOKEN": "guard-env-token"}).header()


def _publish_trust(settings: RuntimeSettings) -> Any:
    """What an https:// target is verified against: the default, or the bundle's CA serial numbers."""
    from services.publisher.publish.credentials import tls_verify

    verify = tls_verify(settings)
    return "default" if verify is True else sorted(c["serialNumber"] for c in verify.get_ca_certs())


def _publish_destination(settings: RuntimeSettings) -> str:
    """Whether a publish to an https:// target outside the campaign's is allowed, or the refusal."""
    from services.publisher.errors import PublishRefused
    from services.publisher.publish.credentials import check_destination

    try:
        check_destination(settings, "https://reports.example.net/upload", reviewed="file://published")
    except PublishRefused as exc:
        return str(exc)
    return "allowed"


_URL_FILE = Path(tempfile.gettempdir()) / f"specdec-guard-redis-url-{os.getpid()}"
_URL_FILE.write_text("redis://specdec-services:secret@10.0.0.8:6381/3\n")


def _client_target_from_env(settings: RuntimeSettings) -> tuple[Any, ...]:
    """The Redis a service started with these settings as its environment connects to."""
    values = settings.model_dump()
    if values["redis_url_file"]:
        del values["redis_url"]  # one source of the URL: the file
    # Only the probe's values: `make test` exports its own SPECDEC_REDIS_URL, which would be a second source.
    exported = os.environ.pop("SPECDEC_REDIS_URL", None)
    try:
        return _client_target(RuntimeSettings(**values))
    finally:
        if exported is not None:
            os.environ["SPECDEC_REDIS_URL"] = exported


def _approver_target(settings: RuntimeSettings) -> str:
    from services.app.context import approver_settings

    return approver_settings(settings).redis_url


PROBES: dict[str, tuple[Any, Callable[[RuntimeSettings], Any]]] = {
    "health_port": (18097, _health_endpoint),
    "redis_url": ("redis://:secret@10.0.0.9:6380/2", _client_target),
    "redis_url_file": (str(_URL_FILE), _client_target_from_env),
    "operator_redis_url": ("redis://specdec-operator:secret@10.0.0.9:6380/2", _approver_target),
    "stream_prefix": ("other", _subscribers),
    "bundle_root": ("/tmp/elsewhere", lambda s: resources_for(s).bundle.root),
    "instance": ("other-instance", _subscribers),
    "max_deliveries": (10, _dead_letters_at_delivery_6),
    "reclaim_idle_ms": (9000, lambda s: (_subscribers(s), _lease(s))),
    "reclaim_poll_ms": (250, _subscribers),
    "read_block_ms": (250, _subscribers),
    "shutdown_grace_s": (0.2, _grace_waited_s),
    "stream_retention_s": (0.0, lambda s: trim_arguments(s, "profile.requested")),
    "max_concurrency": (4, lambda s: sorted(type(sub).__name__ for sub in bootstrap(
        "svc", [Route("profile.requested", _noop)], settings=s, in_memory=True).broker.subscribers)),
    "log_level": ("debug", _debug_logged),
    "publish_token_env": ("SPECDEC_GUARD_PUBLISH_TOKEN", _publish_authorization),
    "publish_token_file": (str(_TOKEN_FILE), _publish_authorization),
    "publish_ca_bundle": (certifi.where(), _publish_trust),
    "publish_allowed_targets": ("https://lake.example.com/reports", _publish_destination),
}


def test_every_field_has_a_probe():
    assert set(PROBES) == set(RuntimeSettings.model_fields)


@pytest.mark.parametrize("field", sorted(PROBES))
def test_changing_the_field_changes_behaviour(field):
    value, probe = PROBES[field]
    base = BASE.model_copy(update={"shutdown_grace_s": 0.6}) if field == "shutdown_grace_s" else BASE
    changed = base.model_copy(update={field: value})
    assert probe(base) != probe(changed), f"SPECDEC_{field.upper()} changed nothing observable"


def test_the_documented_inert_table_is_the_code_table():
    from pathlib import Path

    from contracts.inert import markdown_table

    doc = (Path(__file__).resolve().parents[3] / "docs/configuration.md").read_text()
    assert markdown_table() in doc, "docs/configuration.md's inert table differs from contracts/inert.py"
