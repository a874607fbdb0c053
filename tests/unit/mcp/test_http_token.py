"""`specdec mcp --http`'s bearer token over real HTTP (the SDK's streamable HTTP app under uvicorn on
loopback, the SDK's own client): every mutating tool is refused without the token and with a wrong one,
before it does anything; with the token it runs; the read-only tools and the bundle resources need none."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from services.mcp.deps import default_deps
from services.mcp.server import build_server
from services.runtime.settings import RuntimeSettings

TOKEN = "0123456789abcdef0123456789abcdef"
EXAMPLE = Path(__file__).resolve().parents[3] / "infra/examples/campaign.yaml"
# Each mutating tool with arguments it would act on.
MUTATING: dict[str, dict[str, Any]] = {
    "evidence_init": {"family": "toy-llama", "experiment_id": "tok-run-a"},
    "campaign_init": {"config": str(EXAMPLE), "experiment_id": "tok-run-b", "family": "toy-llama"},
    "campaign_run": {"run_id": "tok-run-c"},
    "approve": {"run_id": "tok-run-c", "i_understand_this_mutates_cluster": True},
    "report_render": {"run_id": "tok-run-c"},
    "publish_to_lake": {"run_id": "tok-run-c", "target": "file://published"},
    "perf_tune_report_campaign_init": {"args": ["--config", str(EXAMPLE), "--experiment-id", "tok-run-d",
                                                "--family", "toy-llama"]},
    "perf_tune_report_campaign_run": {"args": ["--config", str(EXAMPLE), "--campaign", "tok-run-d", "--dry-run"]},
    "perf_tune_report_publish_to_lake": {"args": ["--campaign", "tok-run-d", "--target", "file://published"]},
}


@pytest.fixture
def url(settings: RuntimeSettings) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = build_server(default_deps(settings, TOKEN)).streamable_http_app(host="127.0.0.1")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(timeout=10)


@asynccontextmanager
async def connected(url: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


async def _error(client: Client, name: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error, f"{name} ran: {result.structured_content}"
    return result.content[0].text


@pytest.mark.parametrize("token", [None, TOKEN[::-1]], ids=["no-token", "wrong-token"])
async def test_every_mutating_tool_is_refused_before_it_does_anything(url: str, token: str | None,
                                                                      settings: RuntimeSettings) -> None:
    async with connected(url, token) as client:
        annotated = {t.name for t in (await client.list_tools()).tools if not t.annotations.read_only_hint}
        assert annotated == set(MUTATING)
        for name, arguments in MUTATING.items():
            text = await _error(client, name, arguments)
            assert "Authorization: Bearer" in text and "nothing was done" in text, text
            assert ("no bearer token" if token is None else "not the server's") in text
    assert not settings.bundle_root.exists() or list(settings.bundle_root.iterdir()) == []


async def test_with_the_token_a_mutating_tool_runs_and_read_only_ones_need_none(url: str,
                                                                               settings: RuntimeSettings) -> None:
    async with connected(url, TOKEN) as client:
        stored = await client.call_tool("campaign_init", MUTATING["campaign_init"])
        assert not stored.is_error, stored.content
    assert (settings.bundle_root / "tok-run-b" / "campaign.json").is_file()
    async with connected(url, None) as client:
        # Read-only: refused for what the run lacks, never for the token.
        for name, arguments in {"campaign_status": {"run_id": "tok-run-b"}, "gate": {"run_id": "tok-run-b"},
                                "plan_show": {"run_id": "tok-run-b", "step": "bench"}}.items():
            text = await _error(client, name, arguments)
            assert "Bearer" not in text and "tok-run-b" in text, text
        read = await client.read_resource("bundle://tok-run-b/campaign.json")
        assert '"family":"toy-llama"' in read.contents[0].text.replace(" ", "")
