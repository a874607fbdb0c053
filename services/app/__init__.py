"""specdec's use cases: one function per thing a user does, under every entry point.

The CLI, the MCP server and the workflow's tools call these and nothing else of each other; each takes
its dependencies as arguments and returns a typed result, which the entry point renders
(docs/architecture.md#layers-entry-points-call-use-cases-steps-meet-only-through-contracts). Nothing
here connects at import time, and the modules the Redis-reading commands use load no step
(tests/unit/cli/test_lazy_imports.py).
"""
