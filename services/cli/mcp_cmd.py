"""`specdec mcp`: serve the campaign workflow to MCP clients (services/mcp; docs/mcp.md).

    specdec mcp                                  stdio (the client starts this process)
    specdec mcp --http [--host H] [--port N]     streamable HTTP on 127.0.0.1:8391 by default

Over HTTP every tool that mutates needs `Authorization: Bearer <token>` with the
token named by SPECDEC_MCP_TOKEN_FILE or SPECDEC_MCP_TOKEN_ENV; without one the
server does not start. The MCP SDK is imported only when the command runs.
"""

from __future__ import annotations

import argparse

from services.runtime.errors import ConfigurationError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8391


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is not in 1-65535")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "mcp", help="serve the campaign workflow as MCP tools (stdio; --http for streamable HTTP)",
        description="An MCP server over the same functions as the CLI: evidence_init, campaign_init, campaign_run "
        "(a dry run unless acknowledged), campaign_status, plan_show, approve, gate, report_render, publish_to_lake; "
        "the run's bundle files as bundle://RUN_ID/PATH resources. See docs/mcp.md.",
    )
    p.add_argument("--http", action="store_true",
                   help="serve streamable HTTP instead of stdio; the mutating tools then need the bearer token named by "
                   "SPECDEC_MCP_TOKEN_FILE or SPECDEC_MCP_TOKEN_ENV")
    p.add_argument("--host", help=f"address --http binds (default {DEFAULT_HOST}; another exposes the server beyond "
                   "this machine)")
    p.add_argument("--port", type=_port, help=f"port --http listens on (default {DEFAULT_PORT})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.http and (args.host is not None or args.port is not None):
        raise ConfigurationError("--host and --port apply to --http only: add --http, or drop them for stdio")
    from services.mcp.server import serve
    from services.runtime.settings import RuntimeSettings

    return serve(RuntimeSettings(), http=args.http, host=args.host or DEFAULT_HOST, port=args.port or DEFAULT_PORT)
