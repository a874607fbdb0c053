"""specdec's MCP server (`specdec mcp`, `python -m services.mcp`): the campaign workflow as typed tools for agents.

An entry point like services/cli, and as thin: every tool calls one use case of services/app, and the
run's bundle files are `bundle://RUN_ID/PATH` resources. Neither entry point imports the other.
docs/mcp.md is the user's page.
"""
