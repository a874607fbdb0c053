"""What the MCP server's tools need, passed in (server.build_server): settings, the bundle store,
the bearer-token guard and a way to reach the streams. Nothing connects here."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from services.app.context import Session, connect
from services.mcp.auth import Guard
from services.runtime.bundle.bundle import BundleStore
from services.runtime.settings import RuntimeSettings


@dataclass(frozen=True)
class Deps:
    settings: RuntimeSettings
    bundle: BundleStore
    guard: Guard
    # One connection per tool call (the use cases' `connect`, as the CLI's): a call that fails leaves nothing open,
    # and a server left idle holds no Redis connection.
    connect: Callable[[], AbstractAsyncContextManager[Session]]


def default_deps(settings: RuntimeSettings, token: str | None) -> Deps:
    """The use cases' own parts: the bundle store and a connection to Redis and the bus per call."""
    return Deps(settings=settings, bundle=BundleStore(settings.bundle_root), guard=Guard(token),
                connect=lambda: connect(settings))
