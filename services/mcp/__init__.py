"""specdec's MCP server (`specdec mcp`, `python -m services.mcp`): the campaign workflow as typed tools for agents.

An entry point like services/cli, and as thin: every tool calls one use case of
services/app (the functions the CLI calls), and the run's bundle files are
readable as `bundle://RUN_ID/PATH` resources. Neither entry point imports the
other. Layout: command.py is its command line, server.py builds the server from
its dependencies (deps.py), tools.py adapts the use cases, resources.py serves
bundle files, auth.py checks the bearer token of the HTTP transport.
docs/mcp.md is the user's page.
"""
