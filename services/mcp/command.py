"""`specdec mcp` (also `python -m services.mcp`): serve the campaign workflow to MCP clients over stdio or
streamable HTTP (docs/mcp.md).

The MCP server's own command line: the `specdec` CLI hands `specdec mcp ARGS` to it as a process of its
own (services/cli/main.py), so neither entry point imports the other. Over HTTP it does not start
without a token.
"""

from __future__ import annotations

import argparse
import sys

from pydantic import ValidationError

from services.runtime.errors import ConfigurationError, SpecdecError, invalid_input

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8391


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is not in 1-65535")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="specdec mcp",
        description="An MCP server over specdec's use cases (services/app), as the CLI: evidence_init, campaign_init, "
        "campaign_validate, campaign_run (a dry run unless acknowledged), campaign_status, plan_show, approve, gate, "
        "report_render, publish_to_lake; the run's bundle files as bundle://RUN_ID/PATH resources. See docs/mcp.md.",
    )
    p.add_argument("--http", action="store_true",
                   help="serve streamable HTTP instead of stdio; every call then needs the bearer token named by "
                   "SPECDEC_MCP_TOKEN_FILE or SPECDEC_MCP_TOKEN_ENV")
    p.add_argument("--host", help=f"address --http binds (default {DEFAULT_HOST}; another exposes the server beyond "
                   "this machine)")
    p.add_argument("--port", type=_port, help=f"port --http listens on (default {DEFAULT_PORT})")
    return p


def main(argv: list[str] | None = None) -> int:
    from services.runtime.environment import startup_problem
    from services.runtime.settings import RuntimeSettings

    problem = startup_problem()  # first: a misspelt SPECDEC_* variable would be ignored
    if problem is not None:
        print(f"specdec mcp: {problem}", file=sys.stderr)
        return 2
    try:
        settings = RuntimeSettings()
        args = build_parser().parse_args(argv)
        if not args.http and (args.host is not None or args.port is not None):
            raise ConfigurationError("--host and --port apply to --http only: add --http, or drop them for stdio")
        from services.mcp.server import serve

        return serve(settings, http=args.http, host=args.host or DEFAULT_HOST, port=args.port or DEFAULT_PORT)
    except SpecdecError as exc:
        print(f"specdec mcp: {exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        print(f"specdec mcp: {invalid_input(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
