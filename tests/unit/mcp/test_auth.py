"""The bearer-token rules of `specdec mcp --http` (services/mcp/auth.py), as pure logic."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.mcp.auth import Guard, McpSettings, load_token
from services.mcp.errors import TokenUnavailable, Unauthorized

TOKEN = "s3cr3t-token-0123456789abcdef"


def test_stdio_checks_nothing() -> None:
    Guard(None).check(None, "campaign_run")
    assert not Guard(None).required


@pytest.mark.parametrize("headers", [None, {}, {"Authorization": ""}, {"authorization": f"Basic {TOKEN}"},
                                     {"authorization": "Bearer"}])
def test_no_bearer_token_is_refused(headers: dict[str, str] | None) -> None:
    with pytest.raises(Unauthorized, match="no bearer token.*nothing was done"):
        Guard(TOKEN).check(headers, "campaign_run")


def test_a_wrong_token_is_refused_and_the_right_one_passes_in_any_header_case() -> None:
    with pytest.raises(Unauthorized, match="not the server's"):
        Guard(TOKEN).check({"authorization": f"Bearer {TOKEN}x"}, "approve")
    Guard(TOKEN).check({"Authorization": f"bearer  {TOKEN} "}, "approve")
    Guard(TOKEN).check({"AUTHORIZATION": f"Bearer {TOKEN}"}, "approve")


def test_the_token_comes_from_the_named_environment_variable() -> None:
    settings = McpSettings(mcp_token_env="AGENT_TOKEN")
    assert load_token(settings, {"AGENT_TOKEN": f" {TOKEN}\n"}) == TOKEN
    with pytest.raises(TokenUnavailable, match="AGENT_TOKEN.*empty"):
        load_token(settings, {})


def test_the_token_file_must_be_private_and_long_enough(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o644)
    with pytest.raises(TokenUnavailable, match="chmod 600"):
        load_token(McpSettings(mcp_token_file=str(path)))
    path.chmod(0o600)
    assert load_token(McpSettings(mcp_token_file=str(path))) == TOKEN
    path.write_text("short")
    with pytest.raises(TokenUnavailable, match="too short"):
        load_token(McpSettings(mcp_token_file=str(path)))
    with pytest.raises(TokenUnavailable, match="cannot read"):
        load_token(McpSettings(mcp_token_file=str(tmp_path / "missing")))


def test_without_a_token_setting_http_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECDEC_MCP_TOKEN_ENV", raising=False)
    monkeypatch.delenv("SPECDEC_MCP_TOKEN_FILE", raising=False)
    with pytest.raises(TokenUnavailable, match="SPECDEC_MCP_TOKEN_FILE"):
        load_token(McpSettings())


def test_one_token_source_only() -> None:
    with pytest.raises(ValueError, match="both set"):
        McpSettings(mcp_token_env="A", mcp_token_file="/x")
