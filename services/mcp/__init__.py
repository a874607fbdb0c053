"""specdec's MCP server (`specdec mcp`): the campaign workflow as typed tools for agents.

An entry point like services/cli, and as thin: every tool calls the functions the
CLI calls (services/cli/submit.py, ops.py, plan_cmd.py, report_cmd.py's publish
path), and the run's bundle files are readable as `bundle://RUN_ID/PATH`
resources. Layout: server.py builds the server from its dependencies, tools.py
wraps the CLI's functions, resources.py serves bundle files, auth.py checks the
bearer token of the HTTP transport. docs/mcp.md is the user's page.
"""
