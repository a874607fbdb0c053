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

Three parts, by what a user is doing: `campaign/` (submitting and validating a campaign file,
the canonical matrix read, the next run's campaign written), `runs/` (operating a run that
exists: approve, request, status, watch, resume, plan show, gate, report, dead letters) and
`workflow/` (the campaign workflow's tools, over the other two). What they all share stays
here: the connection (`context.py`) and the typed results (`results.py`).
"""
