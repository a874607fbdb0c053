"""Credentials and trust of https:// publish targets, from RuntimeSettings.

The bearer token is read only at the moment of a live send, from the variable or file the settings name
(never the campaign or a command line), held in a `BearerToken` whose repr hides it, and put in the
Authorization header only. `check_destination` refuses a target the settings do not allow before the token
is read or anything is sent, dry runs included (docs/lake.md#where-the-token-may-go)."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import httpx

from services.publisher.errors import PublishCredentialsError, PublishRefused
from services.runtime.secrets import Unreadable, from_env, from_file
from services.runtime.settings import RuntimeSettings
from services.runtime.url_prefix import parse_prefixes, same_destination

# RFC 6750 b64token: letters, digits and -._~+/ then optional '=' padding; anything else could
# split or inject a header, so it is refused rather than sent.
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=")


@dataclass(frozen=True)
class TokenSource:
    """Where the token is read from: shown in messages instead of the token."""

    kind: Literal["env", "file"]
    name: str  # the variable's name or the file's path

    def describe(self) -> str:
        if self.kind == "env":
            return f"the environment variable {self.name} (SPECDEC_PUBLISH_TOKEN_ENV)"
        return f"the file {self.name} (SPECDEC_PUBLISH_TOKEN_FILE)"


class BearerToken:
    """A token read from its source; its repr and str never show it."""

    __slots__ = ("_value", "source")

    def __init__(self, value: str, source: TokenSource) -> None:
        self._value = value
        self.source = source

    def header(self) -> str:
        return f"Bearer {self._value}"

    def __repr__(self) -> str:
        return f"BearerToken(<hidden>, from {self.source.describe()})"

    __str__ = __repr__


def token_source(settings: RuntimeSettings) -> TokenSource | None:
    """Where the settings say the token is; None: https:// targets are sent to without one."""
    if settings.publish_token_env:
        return TokenSource("env", settings.publish_token_env)
    if settings.publish_token_file:
        return TokenSource("file", settings.publish_token_file)
    return None


def read_token(source: TokenSource, environ: Mapping[str, str] | None = None) -> BearerToken:
    """The token from its source, checked; PublishCredentialsError (naming the source only) otherwise."""
    if source.kind == "env":
        value = from_env(source.name, environ)
        if not value:
            raise PublishCredentialsError(
                f"no publish token: {source.describe()} is unset or empty; export the token in it, or unset "
                "SPECDEC_PUBLISH_TOKEN_ENV to send without one"
            )
    else:
        try:
            value = from_file(source.name)
        except Unreadable as exc:
            raise PublishCredentialsError(
                f"no publish token: {source.describe()} cannot be read ({type(exc.error).__name__}: "
                f"{exc.reason}); fix the file or SPECDEC_PUBLISH_TOKEN_FILE"
            ) from None
        if not value:
            raise PublishCredentialsError(f"no publish token: {source.describe()} is empty; write the token into it")
    if not set(value) <= _TOKEN_CHARS:
        raise PublishCredentialsError(
            f"the publish token in {source.describe()} holds characters a bearer token cannot (whitespace, quotes, "
            "non-ASCII, ...): store the token alone"
        )
    return BearerToken(value, source)


def check_destination(settings: RuntimeSettings, url: str, reviewed: str | None) -> None:
    """Refuse (PublishRefused, one line naming the setting) an https:// or http:// target the settings do not
    allow; `reviewed` is the campaign's publish.target as the run's bundle records it (None: none readable)."""
    try:  # checked when the settings were read; a copy made without validation is checked here
        allowed = parse_prefixes(settings.publish_allowed_targets, "SPECDEC_PUBLISH_ALLOWED_TARGETS")
    except ValueError as exc:
        raise PublishRefused(f"{exc}; nothing was sent") from None
    user = _user_note(url)
    if allowed:
        if any(prefix.covers(url) for prefix in allowed):
            return
        raise PublishRefused(
            f"publish target {url} is outside SPECDEC_PUBLISH_ALLOWED_TARGETS ({' '.join(p.text for p in allowed)})"
            f"{user}; nothing was sent: publish to a listed target, or add this target's prefix to "
            "SPECDEC_PUBLISH_ALLOWED_TARGETS if it may receive the report (and the token, when one is configured)"
        )
    source = token_source(settings)
    if source is None or (reviewed is not None and same_destination(url, reviewed)):
        return
    raise PublishRefused(
        f"publish target {url} is not the campaign's publish.target ({reviewed or 'none recorded'}){user}, and the "
        f"bearer token from {source.describe()} goes only where the operator allows; nothing was sent: add the "
        "target's prefix to SPECDEC_PUBLISH_ALLOWED_TARGETS if the token belongs there, publish to the campaign's "
        "publish.target, or unset the token setting to publish there without a token"
    )


def _user_note(url: str) -> str:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return ""
    if not parsed.userinfo:
        return ""
    return f" (it names a user before '@': its host is {parsed.host}, and a target naming a user is never allowed)"


def tls_verify(settings: RuntimeSettings) -> ssl.SSLContext | Literal[True]:
    """What an https:// target is verified against: the CA bundle's context, or True (httpx's default)."""
    if not settings.publish_ca_bundle:
        return True
    try:
        return ssl.create_default_context(cafile=settings.publish_ca_bundle)
    except (OSError, ssl.SSLError) as exc:
        raise PublishCredentialsError(
            f"SPECDEC_PUBLISH_CA_BUNDLE={settings.publish_ca_bundle} is not a readable PEM file of CA certificates "
            f"({exc}); point it at one, or unset it to use the system's"
        ) from None
