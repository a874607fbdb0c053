"""The MCP tools' refusals and the bundle resources' confinement, through the SDK's in-process client
against a real Redis: each refusal is an MCP tool error with the CLI's message, and leaves nothing behind."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from mcp import Client
from mcp.shared.exceptions import MCPError

from services.mcp.deps import default_deps
from services.mcp.server import build_server
from services.runtime.settings import RuntimeSettings
from tests.support.mcp_content import text_of

EXAMPLE = Path(__file__).resolve().parents[3] / "infra/examples/campaign.yaml"


@pytest.fixture(autouse=True)
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The campaigns these tests write live in tmp_path: the server reads files there and in the repository."""
    monkeypatch.setenv("SPECDEC_MCP_ROOTS", f"{tmp_path}{os.pathsep}{EXAMPLE.parents[2]}")


@asynccontextmanager
async def serving(settings: RuntimeSettings) -> AsyncIterator[Client]:
    # Entered in the test's own task: the SDK's task groups must exit where they were entered.
    async with Client(build_server(default_deps(settings, None))) as c:
        yield c


def _streams(settings: RuntimeSettings) -> list[bytes]:
    client = redis.Redis.from_url(settings.redis_url)
    try:
        return [key for key in client.scan_iter(match=f"{settings.stream_prefix}.*")]
    finally:
        client.close()


async def _ok(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, text_of(result.content[0])
    return result.structured_content


async def _refused(client: Client, name: str, **arguments: Any) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error, f"{name} ran: {result.structured_content}"
    return text_of(result.content[0])


def _campaign(tmp_path: Path, **edits: Any) -> Path:
    data = yaml.safe_load(EXAMPLE.read_text())
    data.update(edits)
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


async def test_an_acknowledgement_token_in_any_argument_is_refused_as_on_the_cli(settings, tmp_path):
    async with serving(settings) as client:
        text = await _refused(client, "evidence_init", family="toy-llama", experiment_id="i-understand-this")
        assert "looks like an acknowledgement" in text and "'i-understand-this'" in text
        odd = tmp_path / "I_UNDERSTAND_THIS_MUTATES_CLUSTER" / "campaign.yaml"
        text = await _refused(client, "campaign_init", config=str(odd), experiment_id="ack-run", family="toy-llama")
        assert "looks like an acknowledgement" in text
        text = await _refused(client, "publish_to_lake", run_id="ack-run", target="file:///tmp/{i understand}")
        assert "looks like an acknowledgement" in text
        assert not settings.bundle_root.exists() and _streams(settings) == []


async def test_campaign_init_stores_the_campaign_of_the_named_family_in_the_named_bundle(settings, tmp_path):
    async with serving(settings) as client:
        made = await _ok(client, "evidence_init", family="toy-llama", experiment_id="init-run")
        outside = tmp_path / "elsewhere" / "init-run"
        text = await _refused(
            client,
            "campaign_init",
            config=str(EXAMPLE),
            experiment_id="init-run",
            family="toy-llama",
            evidence_bundle=str(outside),
        )
        assert "not under the services' bundle root" in text
        text = await _refused(
            client,
            "campaign_init",
            config=str(EXAMPLE),
            experiment_id="init-run",
            family="toy-llama",
            evidence_bundle=str(settings.bundle_root / "other-run"),
        )
        assert "not the bundle of run init-run" in text
        text = await _refused(client, "campaign_init", config=str(EXAMPLE), experiment_id="init-run", family="llama-3")
        assert "family 'toy-llama', not 'llama-3'" in text
        assert list(Path(made["bundle_path"]).iterdir()) == []  # nothing was stored by a refusal
        stored = await _ok(client, "campaign_init", config=str(EXAMPLE), experiment_id="init-run", family="toy-llama",
                           evidence_bundle=made["bundle_path"])
        assert stored["campaign"]["uri"] == "bundle://init-run/campaign.json"
        text = await _refused(
            client, "campaign_init", config=str(EXAMPLE), experiment_id="init-run", family="toy-llama"
        )
        assert "already holds a campaign" in text
        assert _streams(settings) == [], "campaign_init published something"


async def test_campaign_init_names_every_problem_of_the_campaign(settings, tmp_path):
    async with serving(settings) as client:
        broken = _campaign(tmp_path, gate={"objective": None, "acceptance_floor": None})
        text = await _refused(
            client, "campaign_init", config=str(broken), experiment_id="bad-campaign", family="toy-llama"
        )
        assert "cannot be submitted; nothing was published" in text and "missing: gate.objective" in text
        assert not (settings.bundle_root / "bad-campaign").exists()


async def test_a_dry_run_of_a_pre_approving_campaign_is_refused_and_publishes_nothing(settings, tmp_path):
    async with serving(settings) as client:
        path = _campaign(tmp_path, review={"pre_approve": ["bench"]},
                         acknowledgements={"i_understand_this_mutates_cluster": True})
        stored = await _ok(client, "campaign_init", config=str(path), experiment_id="pre-approved", family="toy-llama")
        assert stored["pre_approved_steps"] == ["bench"]
        text = await _refused(client, "campaign_run", run_id="pre-approved")
        assert "pre-approves its bench plan" in text and "a dry run cannot be honoured" in text
        assert _streams(settings) == []


async def test_campaign_run_refuses_what_it_cannot_honour(settings):
    async with serving(settings) as client:
        await _ok(client, "campaign_init", config=str(EXAMPLE), experiment_id="plain-run", family="toy-llama")
        text = await _refused(client, "campaign_run", run_id="plain-run", plan_sha256s=["a" * 64])
        assert "a dry run never does" in text
        text = await _refused(client, "campaign_run", run_id="plain-run", i_understand_this_mutates_cluster=True,
                              plan_sha256s=["a" * 64])
        assert "not published yet" in text
        assert "holds no campaign" in await _refused(client, "campaign_run", run_id="no-such-run")
        assert _streams(settings) == []


async def test_bundle_resources_are_recorded_files_of_the_run_only(settings):
    async with serving(settings) as client:
        await _ok(client, "campaign_init", config=str(EXAMPLE), experiment_id="res-run", family="toy-llama")
        run_dir = settings.bundle_root / "res-run"
        read = await client.read_resource("bundle://res-run/campaign.yaml")
        assert text_of(read.contents[0]) == (run_dir / "campaign.yaml").read_text()
        manifest = await client.read_resource("bundle://res-run/manifest.json")
        assert '"run_id":"res-run"' in text_of(manifest.contents[0]).replace(" ", "")
        (settings.bundle_root / "secret.txt").write_text("outside the run")
        (run_dir / "stray.txt").write_text("never recorded")
        for uri, why in [("bundle://res-run/../secret.txt", "Unknown resource"),
                         ("bundle://res-run/%2E%2E/secret.txt", "Unknown resource"),
                         ("bundle://res-run//etc/passwd", "Unknown resource"),
                         ("bundle://res-run/stray.txt", "never recorded"),
                         ("bundle://res-run/.index/x.json", "invalid component"),
                         ("bundle://Res_Run/campaign.json", "invalid run ID")]:
            with pytest.raises(MCPError, match=why):
                await client.read_resource(uri)
        (run_dir / "campaign.yaml").write_text("changed on disk\n")
        with pytest.raises(MCPError, match="changed on disk"):
            await client.read_resource("bundle://res-run/campaign.yaml")


async def test_campaign_validate_is_the_validate_use_case_and_creates_nothing(settings, tmp_path):
    broken = _campaign(tmp_path, bogus_key=1, family="Bad Family!")
    async with serving(settings) as client:
        result = await _ok(client, "campaign_validate", config=str(broken))
        assert result["accepted"] is False and result["cells"] == []
        assert any("bogus_key" in p for p in result["problems"]) and any("family" in p for p in result["problems"])
        result = await _ok(client, "campaign_validate", config=str(EXAMPLE))
        assert result["accepted"] is True and {c["cell_id"] for c in result["cells"]} >= {"standing"}
    assert not settings.bundle_root.exists() and _streams(settings) == []
