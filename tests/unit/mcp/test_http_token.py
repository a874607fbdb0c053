"""`specdec mcp --http`'s bearer token over real HTTP (the SDK's streamable HTTP app under uvicorn on
loopback, the SDK's own client): without the token or with a wrong one the client is answered 401 and
nothing is done; with the token the mutating tools, the read-only ones and the bundle resources run."""

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
from tests.support.mcp_content import text_of

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
    return text_of(result.content[0])


@pytest.mark.parametrize("token", [None, TOKEN[::-1]], ids=["no-token", "wrong-token"])
async def test_without_the_token_the_client_gets_401_and_nothing_is_done(url: str, token: str | None,
                                                                       settings: RuntimeSettings) -> None:
    # Every request, whatever its method, over the SDK's own client (tests/unit/mcp/test_hostile.py sends each
    # tool, resource and prompt of the registry).
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    with pytest.raises(Exception):  # noqa: B017 - the SDK's client words a refused connection its own way
        async with httpx2.AsyncClient(headers=headers, timeout=30, event_hooks={"response": [record]}) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                await client.call_tool("campaign_init", MUTATING["campaign_init"])
    assert statuses and set(statuses) == {401}, statuses
    assert not settings.bundle_root.exists() or list(settings.bundle_root.iterdir()) == []


async def test_with_the_token_every_kind_of_call_runs(url: str, settings: RuntimeSettings) -> None:
    async with connected(url, TOKEN) as client:
        annotated = {t.name for t in (await client.list_tools()).tools
                     if not (t.annotations and t.annotations.read_only_hint)}
        assert annotated == set(MUTATING)
        stored = await client.call_tool("campaign_init", MUTATING["campaign_init"])
        assert not stored.is_error, stored.content
        # Read-only: refused for what the run lacks, never for the token.
        for name, arguments in {"campaign_status": {"run_id": "tok-run-b"}, "gate": {"run_id": "tok-run-b"},
                                "plan_show": {"run_id": "tok-run-b", "step": "bench"}}.items():
            text = await _error(client, name, arguments)
            assert "Bearer" not in text and "tok-run-b" in text, text
        read = await client.read_resource("bundle://tok-run-b/campaign.json")
        assert '"family":"toy-llama"' in text_of(read.contents[0]).replace(" ", "")
    assert (settings.bundle_root / "tok-run-b" / "campaign.json").is_file()
