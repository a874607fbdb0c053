"""What the MCP server's tools need, passed in (server.build_server): settings, the bundle store,
the bearer-token guard, the folders a caller's files are read from, and a way to reach the streams.
Nothing connects here."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from services.app.campaign.roots import FileRoots
from services.app.context import Session, connect
from services.mcp.auth import Guard, McpSettings
from services.runtime.bundle.bundle import BundleStore
from services.runtime.settings import RuntimeSettings


@dataclass(frozen=True)
class Deps:
    settings: RuntimeSettings
    bundle: BundleStore
    guard: Guard
    # The only folders a tool reads a campaign, matrix or traffic file from (SPECDEC_MCP_ROOTS).
    roots: FileRoots
    # One connection per tool call (the use cases' `connect`, as the CLI's): a call that fails leaves nothing open,
    # and a server left idle holds no Redis connection.
    connect: Callable[[], AbstractAsyncContextManager[Session]]


def default_deps(settings: RuntimeSettings, token: str | None, roots: FileRoots | None = None) -> Deps:
    """The use cases' own parts: the bundle store and a connection to Redis and the bus per call; the roots
    of the MCP settings (SPECDEC_MCP_ROOTS) unless given."""
    return Deps(settings=settings, bundle=BundleStore(settings.bundle_root), guard=Guard(token),
                roots=roots if roots is not None else McpSettings().roots, connect=lambda: connect(settings))
