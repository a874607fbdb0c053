"""The MCP server tried as an attacker would: over real HTTP (the SDK's streamable HTTP app under uvicorn on
loopback) no tool, resource or prompt answers a call without the bearer token, and no handler runs; over any
transport, a file outside the configured roots (SPECDEC_MCP_ROOTS) is refused with one message whether or not
it exists, through `..` or a symlink alike; and a campaign that does not parse is named by file, line and
column, never by the text of its lines (the MCP tool and `specdec validate` alike)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types
import pytest
import uvicorn
import yaml
from mcp import Client
from mcp.server.mcpserver import MCPServer

from services.mcp.deps import default_deps
from services.mcp.server import build_server
from services.runtime.settings import RuntimeSettings
from tests.support.mcp_content import text_of

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "infra/examples/campaign.yaml"
TOKEN = "0123456789abcdef0123456789abcdef"
SECRET = "postgres://user:s3cret@db/x"
VERSION = mcp_types.LATEST_PROTOCOL_VERSION
LEGACY_VERSION = "2025-06-18"  # a protocol version with an initialize handshake and sessions
META = {"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture
def handled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every tool call, resource read and prompt the server's handlers receive (recorded, then handled as ever)."""
    calls: list[str] = []
    for method in ("_handle_call_tool", "_handle_read_resource", "_handle_get_prompt"):
        original = getattr(MCPServer, method)

        async def recording(self: Any, *args: Any, _original: Any = original, _method: str = method, **kw: Any) -> Any:
            calls.append(_method)
            return await _original(self, *args, **kw)

        monkeypatch.setattr(MCPServer, method, recording)
    return calls


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server's one root (SPECDEC_MCP_ROOTS), with a campaign inside; outside it, a readable campaign."""
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    shutil.copy(EXAMPLE, root / "campaign.yaml")
    shutil.copy(EXAMPLE, tmp_path / "outside" / "campaign.yaml")
    (root / "escape.yaml").symlink_to(tmp_path / "outside" / "campaign.yaml")
    monkeypatch.setenv("SPECDEC_MCP_ROOTS", f"{root}{os.pathsep}{ROOT / 'infra/examples'}")
    return root


@pytest.fixture
def http_server(settings: RuntimeSettings, roots: Path, handled: list[str]) -> Iterator[tuple[str, MCPServer]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mcp = build_server(default_deps(settings, TOKEN))
    server = uvicorn.Server(uvicorn.Config(mcp.streamable_http_app(host="127.0.0.1"), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp", mcp
    server.should_exit = True
    thread.join(timeout=10)


def _post(http: httpx.Client, url: str, method: str, params: dict[str, Any], *, name: str, token: str | None
          ) -> httpx.Response:
    """One JSON-RPC request as a client of the current protocol sends it (no session needed); `initialize` as
    a client of a protocol with sessions opens one."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if method != "initialize":
        headers.update({"mcp-protocol-version": VERSION, "mcp-method": method, "mcp-name": name})
        params = {**params, "_meta": META}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return http.post(url, json=body, headers=headers)


async def _everything(server: MCPServer) -> list[tuple[str, dict[str, Any], str]]:
    """A request to each tool, resource template, resource and prompt the server registers."""
    requests = [("tools/call", {"name": t.name, "arguments": {}}, t.name) for t in await server.list_tools()]
    for template in await server.list_resource_templates():
        uri = re.sub(
            r"\{\+?(\w+)\}", lambda m: "hostile-run" if m[1] == "run_id" else "campaign", template.uri_template
        )
        requests.append(("resources/read", {"uri": uri}, uri))
    requests += [("resources/read", {"uri": str(r.uri)}, str(r.uri)) for r in await server.list_resources()]
    requests += [("prompts/get", {"name": p.name, "arguments": {}}, p.name) for p in await server.list_prompts()]
    return requests


@pytest.mark.parametrize("token", [None, TOKEN[::-1]], ids=["no-token", "wrong-token"])
async def test_every_tool_resource_and_prompt_answers_401_without_the_token_and_no_handler_runs(
        http_server: tuple[str, MCPServer], handled: list[str], roots: Path, token: str | None) -> None:
    url, server = http_server
    requests = await _everything(server)
    assert len([r for r in requests if r[0] == "tools/call"]) >= 13 and any(r[0] == "resources/read" for r in requests)
    initialize = {
        "protocolVersion": LEGACY_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "hostile", "version": "1"},
    }
    with httpx.Client(timeout=30) as http:
        for method, params, name in [("initialize", initialize, "initialize"), *requests]:
            response = await _to_thread(_post, http, url, method, params, name=name, token=token)
            assert response.status_code == 401, f"{method} {name}: {response.status_code} {response.text[:300]}"
            assert response.headers.get("www-authenticate", "").startswith("Bearer "), (name, response.headers)
        assert handled == []
        # The same request with the token reaches the handler: the recorder sees what it is meant to see.
        validated = await _to_thread(_post, http, url, "tools/call", {
            "name": "campaign_validate", "arguments": {"config": str(roots / "campaign.yaml")}},
            name="campaign_validate", token=TOKEN)
    assert validated.status_code == 200 and '"accepted":true' in validated.text.replace(" ", ""), validated.text
    assert handled == ["_handle_call_tool"]


async def _to_thread(fn: Any, *args: Any, **kwargs: Any) -> Any:
    import anyio.to_thread

    return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))


def _campaign(path: Path, **edits: Any) -> Path:
    data = yaml.safe_load(EXAMPLE.read_text())
    data.update(edits)
    path.write_text(yaml.safe_dump(data))
    return path


async def _refusal(client: Client, name: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error, f"{name} ran: {result.structured_content}"
    return text_of(result.content[0])


async def test_a_path_outside_the_roots_gets_one_refusal_whether_or_not_it_exists(
        settings: RuntimeSettings, roots: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "traffic.jsonl").write_text((ROOT / "infra/examples/sample-traffic.jsonl").read_text())
    configs = {"existing": outside / "campaign.yaml", "missing": outside / "nothing.yaml",
               "dot-dot": roots / ".." / "outside" / "campaign.yaml", "symlink": roots / "escape.yaml"}
    traffic = {"existing": outside / "traffic.jsonl", "missing": outside / "nothing.jsonl",
               "dot-dot": roots / ".." / "outside" / "traffic.jsonl"}
    async with Client(build_server(default_deps(settings, None))) as client:
        assert not (await client.call_tool("campaign_validate", {"config": str(roots / "campaign.yaml")})).is_error
        seen: dict[str, str] = {}
        for how, config in configs.items():
            seen[f"validate {how}"] = await _refusal(client, "campaign_validate", {"config": str(config)})
            seen[f"init {how}"] = await _refusal(client, "campaign_init", {
                "config": str(config), "experiment_id": "hostile-run", "family": "toy-llama"})
            seen[f"workflow init {how}"] = await _refusal(client, "perf_tune_report_campaign_init", {"args": [
                "--config", str(config), "--experiment-id", "hostile-run", "--family", "toy-llama"]})
        for how, path in traffic.items():
            inside = _campaign(roots / f"traffic-{how}.yaml", traffic={"path": str(path)})
            seen[f"traffic {how}"] = await _refusal(client, "campaign_validate", {"config": str(inside)})
    messages = {re.sub(r"^Error executing tool \w+: ", "", text) for text in seen.values()}  # the SDK names the tool
    campaign_file = {m for m in messages if "traffic.path" not in m}
    assert len(campaign_file) == 1 and len(messages) == 2, seen
    for message in messages:
        assert "SPECDEC_MCP_ROOTS" in message and str(roots) in message, message
        assert "nothing.yaml" not in message and "No such file" not in message, message
    assert not settings.bundle_root.exists() or list(settings.bundle_root.iterdir()) == []


def _broken(path: Path) -> Path:
    """A campaign whose third line does not parse, and carries a database URL with its password."""
    path.write_text(f"family: toy-llama\ntarget:\n  db: {SECRET}: [\nstanding: null\n")
    return path


async def test_a_parse_error_names_file_line_and_column_and_never_the_line(
        settings: RuntimeSettings, settings_env: dict[str, str], roots: Path) -> None:
    broken = _broken(roots / "broken.yaml")
    async with Client(build_server(default_deps(settings, None))) as client:
        result = await client.call_tool("campaign_validate", {"config": str(broken)})
    text = "\n".join(text_of(c) for c in result.content)
    done = subprocess.run([sys.executable, "-m", "services.cli.main", "validate", str(broken)], cwd=ROOT,
                          env=settings_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    for said in (text, done.stdout + done.stderr):
        assert f"{broken}:3:" in said, said
        assert "s3cret" not in said and "postgres" not in said, said
