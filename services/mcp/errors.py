"""The MCP server's errors: one root, in the SpecdecError family (services/runtime/errors.py)."""

from __future__ import annotations

from services.runtime.errors import SpecdecError


class McpError(SpecdecError):
    """Root of the MCP server's own errors (the CLI's functions raise their own families)."""


class TokenUnavailable(McpError):
    """`specdec mcp --http` has no usable bearer token in its settings; the message says where to put one."""


class Unauthorized(McpError):
    """A mutating tool was called over HTTP without the server's bearer token; nothing was done."""
