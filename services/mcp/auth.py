"""The bearer token of `specdec mcp --http`, and the server's other settings (McpSettings).

Over HTTP every request needs the token, checked by the SDK's bearer middleware before any handler
runs, and once more by each tool that mutates; over stdio the caller started the server, so nothing is
checked. The token is never a setting itself: a setting names the variable or file that holds it
(docs/mcp.md#http-and-the-bearer-token).
"""

from __future__ import annotations

import hmac
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.app.campaign.roots import FileRoots
from services.mcp.errors import TokenUnavailable, Unauthorized
from services.runtime.secrets import OpenToOthers, Unreadable, from_env, from_file

MIN_TOKEN_CHARS = 16


class McpSettings(BaseSettings):
    """Where `specdec mcp --http` finds its bearer token, and the folders the server reads a caller's files from
    (prefix SPECDEC_, like RuntimeSettings).

    Empty strings mean unset, so the settings round-trip through `SPECDEC_*` variables."""

    model_config = SettingsConfigDict(env_prefix="SPECDEC_", extra="forbid")

    mcp_token_env: str = Field(
        default="", pattern=r"^([A-Za-z_][A-Za-z0-9_]*)?$",
        description="Name of the environment variable holding the bearer token of `specdec mcp --http` (the token "
        "itself is never a setting, never logged); empty: no token from the environment.",
    )
    mcp_token_file: str = Field(
        default="",
        description="File holding the bearer token of `specdec mcp --http` (surrounding whitespace dropped; no access "
        "for group or others); empty: no token file.",
    )

    mcp_roots: str = Field(
        default="",
        description="Folders (separated by the platform's path separator, `:` on Linux; relative ones from the "
        "server's working directory) under which the MCP tools read the campaign files a caller names and the matrix "
        "and traffic files those name; anything else is refused. Empty: the server's working directory alone.",
    )

    @property
    def roots(self) -> FileRoots:
        return FileRoots.parse(self.mcp_roots)

    @model_validator(mode="after")
    def _one_source(self) -> McpSettings:
        if self.mcp_token_env and self.mcp_token_file:
            raise ValueError("SPECDEC_MCP_TOKEN_ENV and SPECDEC_MCP_TOKEN_FILE are both set: the token comes from one "
                             "place; unset one of them")
        return self


def load_token(settings: McpSettings, environ: Mapping[str, str] = os.environ) -> str:
    """The bearer token the settings point at; TokenUnavailable, saying what to set, without one."""
    if settings.mcp_token_env:
        token = from_env(settings.mcp_token_env, environ)
        where = f"environment variable {settings.mcp_token_env} (SPECDEC_MCP_TOKEN_ENV)"
    elif settings.mcp_token_file:
        token, where = _read_token_file(Path(settings.mcp_token_file)), f"file {settings.mcp_token_file}"
    else:
        raise TokenUnavailable(
            "specdec mcp --http needs a bearer token, which every call must carry: set SPECDEC_MCP_TOKEN_FILE to a "
            "file holding it (chmod 600), or SPECDEC_MCP_TOKEN_ENV to the name of an environment variable holding it"
        )
    if len(token) < MIN_TOKEN_CHARS:
        raise TokenUnavailable(f"the bearer token in {where} is {'empty' if not token else 'too short'}: give one of "
                               f"at least {MIN_TOKEN_CHARS} characters, e.g. from `openssl rand -hex 32`")
    return token


def _read_token_file(path: Path) -> str:
    try:
        return from_file(path, owner_only=True)
    except Unreadable as exc:
        raise TokenUnavailable(f"cannot read the token file {path} (SPECDEC_MCP_TOKEN_FILE): {exc.reason}") from None
    except OpenToOthers as exc:
        raise TokenUnavailable(f"the token file {path} is open to group or others (mode {stat.filemode(exc.mode)}): "
                               f"`chmod 600 {path}`") from None


class StaticTokenVerifier(TokenVerifier):
    """The SDK's token check (its bearer middleware calls it on every HTTP request) against the one token of the
    server's settings, compared in constant time. The token is provisioned by the operator, not issued by an
    authorization server, so it carries no scopes, expiry or audience."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        if not hmac.compare_digest(token.strip().encode(), self._token):
            return None
        return AccessToken(token="<the server's bearer token>", client_id="specdec-mcp-token", scopes=[])


def http_auth(token: str) -> tuple[TokenVerifier, AuthSettings]:
    """What the SDK needs to require the token on every request to the MCP endpoint: 401 with
    `WWW-Authenticate: Bearer error="invalid_token"` without it. There is no authorization server, so no
    OAuth routes and no protected-resource metadata are served (that document must name one); the issuer
    the SDK's settings require is therefore read by nothing, and names this machine's loopback."""
    settings = AuthSettings(issuer_url=AnyHttpUrl("http://127.0.0.1"), resource_server_url=None, required_scopes=[])
    return StaticTokenVerifier(token), settings


class Guard:
    """The check a mutating tool makes before it does anything (over HTTP the SDK's middleware has already
    refused a request without the token; this is the tool's own check, should it be served another way).

    `token` None: the stdio transport, nothing to check. Otherwise the request's
    `Authorization: Bearer` value must equal it (constant-time comparison)."""

    def __init__(self, token: str | None) -> None:
        self._token = token

    @property
    def required(self) -> bool:
        return self._token is not None

    def http_auth(self) -> tuple[TokenVerifier, AuthSettings] | None:
        """The SDK's verifier and auth settings for this token; None over stdio."""
        return http_auth(self._token) if self._token is not None else None

    def check(self, headers: Mapping[str, str] | None, tool: str) -> None:
        if self._token is None:
            return
        given = _bearer(headers)
        if given is None or not hmac.compare_digest(given.encode(), self._token.encode()):
            problem = "no bearer token" if given is None else "a bearer token that is not the server's"
            raise Unauthorized(
                f"{tool} changes the bundle, the streams, the cluster or a lake, and this call came with {problem}: "
                "send the header `Authorization: Bearer <token>` with the token of the server's settings "
                "(SPECDEC_MCP_TOKEN_FILE or SPECDEC_MCP_TOKEN_ENV); nothing was done"
            )


def _bearer(headers: Mapping[str, str] | None) -> str | None:
    if not headers:
        return None
    # Starlette's Headers are case-insensitive; a plain mapping may not be.
    value = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
    if value is None:
        return None
    scheme, _, token = value.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None
