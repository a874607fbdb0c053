"""`specdec mcp ARGS`: start the MCP server (services/mcp/command.py) in place of this process.

The CLI and the MCP server are two entry points over the same use cases, and
neither imports the other (.importlinter): `specdec mcp` replaces itself with
`python -m services.mcp ARGS` (exec: same process ID, stdio and environment, so an
MCP client that started `specdec mcp` talks to the server directly). The server's
own parser reads ARGS (`specdec mcp --help` lists them).
"""

from __future__ import annotations

import argparse
import os
import sys

MODULE = "services.mcp"


def register(subparsers: argparse._SubParsersAction) -> None:
    # Every token after `mcp` is the server's, options included: with no option prefix of its
    # own, this parser takes `--http` as a word for ARGS rather than an option it lacks.
    p = subparsers.add_parser(
        "mcp", add_help=False, prefix_chars="+",
        help="serve the campaign workflow as MCP tools (stdio; --http for streamable HTTP)",
        description="Runs `python -m services.mcp ARGS`; `specdec mcp --help` shows its options.",
    )
    p.add_argument("args", nargs=argparse.REMAINDER, help="the MCP server's own options (--http, --host, --port)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    argv = [sys.executable, "-m", MODULE, *args.args]
    sys.stdout.flush()
    sys.stderr.flush()
    exec_server(argv)
    return 0  # only reached where exec_server returns (a test's replacement)


def exec_server(argv: list[str]) -> None:
    """Replace this process with the server (never returns)."""
    os.execv(argv[0], argv)  # fixed interpreter and module; ARGS are the server's to parse

