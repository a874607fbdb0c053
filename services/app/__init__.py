"""specdec's use cases: one function per thing a user does, under every entry point.

The CLI (services/cli), the MCP server (services/mcp) and the workflow's tools call
these and nothing else of each other: submit, validate, approve, request, status,
watch, plan show, gate, report, publish and dead-letter replay. Each takes its
dependencies as arguments (a `Session` from `context.connect`, a bundle store,
settings) and returns a typed result; rendering it (text, JSON, an MCP result)
is the entry point's job. Layering (.importlinter): entry points -> use cases ->
steps -> shared code -> runtime -> contracts. Nothing here connects at import
time, and the modules the Redis-reading commands use load no step
(tests/unit/test_cli_lazy_imports.py).
"""
