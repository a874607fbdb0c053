"""Building and serving the MCP server: `build_server(deps)` (tests pass their own deps), `serve(...)`."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from services.mcp import resources, tools
from services.mcp.auth import McpSettings, load_token
from services.mcp.deps import Deps, default_deps
from services.runtime.settings import RuntimeSettings

NAME = "specdec"
INSTRUCTIONS = (
    "specdec runs speculative-decoding campaigns for vLLM with evidence. The workflow: evidence_init (a run and its "
    "bundle) -> campaign_init (validate and store the campaign; campaign_validate checks one without storing it) -> "
    "campaign_run without the acknowledgement (a dry "
    "run: the plans are produced and returned with their sha256, nothing executes) -> read them (plan_show) -> "
    "campaign_run with i_understand_this_mutates_cluster=true and the plan hashes -> campaign_status until the report "
    "-> publish_to_lake (a dry run, then live with i_understand_this_publishes_externally=true). Every file of a run's "
    "bundle is the resource bundle://RUN_ID/PATH."
)


def build_server(deps: Deps) -> MCPServer:
    """Over HTTP (a token in `deps.guard`) the SDK's bearer middleware guards the whole MCP endpoint: every
    request without the token is answered 401 before any tool, resource or prompt handler runs."""
    verifier, auth = deps.guard.http_auth() or (None, None)
    server = MCPServer(NAME, instructions=INSTRUCTIONS, log_level="WARNING", tools=tools.build(deps),
                       token_verifier=verifier, auth=auth)
    resources.register(server, deps.bundle)
    return server


def serve(settings: RuntimeSettings, *, http: bool, host: str, port: int) -> int:
    """Serve until the client goes away (stdio) or the process is stopped (HTTP). Over HTTP every call needs
    the bearer token the settings name; without one the server does not start."""
    mcp = McpSettings()
    token = load_token(mcp) if http else None
    server = build_server(default_deps(settings, token, mcp.roots))
    if http:
        server.run("streamable-http", host=host, port=port)
    else:
        server.run("stdio")
    return 0
