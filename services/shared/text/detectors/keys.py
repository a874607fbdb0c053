"""Secrets found by their shape: key blocks, vendor tokens, URL and header credentials.

- PEM blocks (and PuTTY/SSH2 key files): own rule for the block's extent;
- detect-secrets' regex plugins, each run only when one of its trigger
  substrings occurs, and the key shapes no plugin knows (`_OWN_TOKENS`);
- `scheme://user:password@host`, `curl -u`, and Bearer/Basic/token
  Authorization headers.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import NamedTuple

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from services.shared.text.detectors.assignments import _NOT_VALUES
from services.shared.text.detectors.base import Finding, _extend, _occurrences, entropy

# ----------------------------------------------------------------------------- PEM blocks

# Own rule for the block's extent: detect-secrets' PrivateKeyDetector flags the
# BEGIN line only, and its header list lacks "ENCRYPTED PRIVATE KEY"; this
# pattern covers every header of that list (a unit test checks it).
_PEM = re.compile(
    r"-----BEGIN ([A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----.*?(?:-----END ([A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----|\Z)",
    re.DOTALL,
)
_PUTTY = re.compile(r"PuTTY-User-Key-File-\d:.*?(?:Private-MAC: *[0-9a-fA-F]+|\Z)", re.DOTALL)
_SSH2 = re.compile(
    r"---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----.*?(?:---- END SSH2 ENCRYPTED PRIVATE KEY ----|\Z)", re.DOTALL
)


def _private_keys(view: str, out: list[Finding]) -> None:
    if "PRIVATE KEY" not in view and "PuTTY-User-Key-File" not in view:
        return
    for pattern in (_PEM, _PUTTY, _SSH2):
        for m in pattern.finditer(view):
            out.append(Finding(m.start(), m.end(), "private_key"))


# ----------------------------------------------------------------------------- library plugins

_TOKEN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_JWT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.+/=")
_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


def _aws_kind(value: str) -> str:
    key_id = len(value) == 20 and (value[:4] in ("AKIA", "ASIA", "ABIA", "ACCA") or value[:3] == "A3T")
    return "aws_access_key_id" if key_id else "aws_secret_key"


def _slack_kind(value: str) -> str:
    return "slack_webhook" if value.startswith("https://") else "slack_token"


class _Plugin(NamedTuple):
    plugin: RegexBasedDetector
    kind: Callable[[str], str]
    triggers: tuple[str, ...]  # the plugin runs only if one occurs (lower-cased when `fold`)
    extend: frozenset[str]
    strip: str = ""  # a prefix of the match that stays (AccountKey=)
    fold: bool = False


def _const(kind: str) -> Callable[[str], str]:
    return lambda _value: kind


_PLUGINS: tuple[_Plugin, ...] = (
    _Plugin(AWSKeyDetector(), _aws_kind, ("akia", "asia", "abia", "acca", "a3t", "aws"), _B64, fold=True),
    _Plugin(AzureStorageKeyDetector(), _const("azure_storage_key"), ("AccountKey=",), _B64, strip="AccountKey="),
    _Plugin(SlackDetector(), _slack_kind, ("xox", "hooks.slack.com"), _TOKEN | frozenset("/"), fold=True),
    _Plugin(StripeDetector(), _const("stripe_key"), ("k_live_",), _ALNUM),
    _Plugin(GitHubTokenDetector(), _const("github_token"), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), _TOKEN),
    _Plugin(
        GitLabTokenDetector(),
        _const("gitlab_token"),
        (
            "glpat-",
            "gldt-",
            "glft-",
            "glsoat-",
            "glrt-",
            "GR1348941",
            "glcbt-",
            "glimt-",
            "glptt-",
            "glagent-",
            "gloas-",
        ),
        _TOKEN,
    ),
    _Plugin(JwtTokenDetector(), _const("jwt"), ("eyJ",), _JWT_CHARS),
    _Plugin(OpenAIDetector(), _const("openai_key"), ("T3BlbkFJ",), _TOKEN),
    _Plugin(SendGridDetector(), _const("sendgrid_key"), ("SG.",), _TOKEN),
    _Plugin(NpmDetector(), _const("npm_token"), ("_authToken",), _TOKEN),
    _Plugin(PypiTokenDetector(), _const("pypi_token"), ("pypi-",), _TOKEN),
    _Plugin(TwilioKeyDetector(), _const("twilio_key"), ("AC", "SK"), _ALNUM),
    _Plugin(DiscordBotTokenDetector(), _const("discord_token"), (".",), _TOKEN),
    _Plugin(MailchimpDetector(), _const("mailchimp_key"), ("-us",), _ALNUM),
    _Plugin(TelegramBotTokenDetector(), _const("telegram_token"), (":",), _TOKEN),
    _Plugin(SquareOAuthDetector(), _const("square_secret"), ("sq0csp-",), _TOKEN),
)

# Key shapes no detect-secrets plugin knows (1.5.0), from the vendors' formats.
_OWN_TOKENS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("hf_", re.compile(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}"), "huggingface_token"),
    ("AIza", re.compile(r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}"), "google_api_key"),
    ("sk-ant-", re.compile(r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,}"), "anthropic_key"),
    ("sk-", re.compile(r"(?<![A-Za-z0-9_-])sk-(?!ant-)[A-Za-z0-9_-]{20,}"), "openai_key"),
    ("_test_", re.compile(r"(?<![A-Za-z0-9_])(?:sk|rk)_test_[A-Za-z0-9]{10,}"), "stripe_key"),
    ("github_pat_", re.compile(r"(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{22,}"), "github_token"),
    ("npm_", re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}"), "npm_token"),
    ("xox", re.compile(r"(?<![A-Za-z0-9_-])xox[abposre]-[A-Za-z0-9-]{10,}"), "slack_token"),
    ("AKIA", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Z0-9])"), "aws_access_key_id"),
    ("GOCSPX-", re.compile(r"GOCSPX-[A-Za-z0-9_-]{20,}"), "google_api_key"),
    ("ya29.", re.compile(r"(?<![A-Za-z0-9_-])ya29\.[0-9A-Za-z_-]{20,}"), "token"),
    ("dapi", re.compile(r"(?<![A-Za-z0-9_])dapi[0-9a-f]{32}(?:-\d)?"), "token"),
    ("_v1_", re.compile(r"(?<![A-Za-z0-9_])do[opr]_v1_[0-9a-f]{64}"), "token"),
    ("shp", re.compile(r"(?<![A-Za-z0-9_])shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}"), "token"),
    ("dckr_pat_", re.compile(r"(?<![A-Za-z0-9_])dckr_pat_[A-Za-z0-9_-]{20,}"), "token"),
    ("key-", re.compile(r"(?<![A-Za-z0-9_-])key-[0-9a-f]{32}(?![0-9a-f])"), "api_key"),
    ("sig=", re.compile(r"(?<=[?&;]sig=)[A-Za-z0-9%+/=]{20,}"), "token"),
)


def _is_placeholder_token(value: str) -> bool:
    """`sk-xxxxxxxxxxxxxxxxxxxx`, `AKIAXXXXXXXXXXXXXXXX`: a documentation placeholder
    has the key's shape but a body of one or two repeated characters."""
    tail = value[-16:]
    return len(set(tail)) <= 2


_TRIGGERS = re.compile(
    "|".join(sorted({re.escape(t) for p in _PLUGINS if not p.fold for t in p.triggers}, key=len, reverse=True))
)
_FOLDED_TRIGGERS = re.compile(
    "|".join(sorted({re.escape(t) for p in _PLUGINS if p.fold for t in p.triggers}, key=len, reverse=True))
)


def _plugins(view: str, lowered: str, out: list[Finding]) -> None:
    present = set(_TRIGGERS.findall(view)) | set(_FOLDED_TRIGGERS.findall(lowered))
    if not present:
        return
    for p in _PLUGINS:
        if not any(t in present for t in p.triggers):
            continue
        for value in set(p.plugin.analyze_string(view)):
            if p.strip and value.startswith(p.strip):
                value = value[len(p.strip):]
            if _is_placeholder_token(value):
                continue
            kind = p.kind(value)
            for start in _occurrences(view, value):
                out.append(Finding(start, _extend(view, start, start + len(value), p.extend), kind))

def _own_tokens(view: str, out: list[Finding]) -> None:
    for trigger, pattern, kind in _OWN_TOKENS:
        if trigger in view:
            for m in pattern.finditer(view):
                if not _is_placeholder_token(m.group(0)):
                    out.append(Finding(m.start(), _extend(view, m.start(), m.end(), _TOKEN), kind))


# ----------------------------------------------------------------------------- URLs, headers

# scheme://user:password@host: the userinfo (user and password) is replaced, the
# host stays. A user without a password (ssh://git@host) is not a credential.
_URL_CREDS = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://([^\s/?#@:]*:[^\s/?#]*)@(?=[^\s/?#@]*[A-Za-z0-9\]])")
_CURL_USER = re.compile(r"(?:\s-u\s*|--user[= ])['\"]?([^\s:'\"]+:[^\s'\"]+)")
_AUTH_HEADER = re.compile(r"(?i)\b(bearer|basic)([ \t]+)([A-Za-z0-9._~+/=-]{12,})")
_TOKEN_HEADER = re.compile(r"(?i)\bauthorization[\"']?[ \t]*[:=][ \t]*[\"']?(token)([ \t]+)([A-Za-z0-9._~+/=-]{12,})")


def _urls_and_headers(view: str, out: list[Finding]) -> None:
    if "://" in view and "@" in view:
        for m in _URL_CREDS.finditer(view):
            password = m.group(1).split(":", 1)[1]
            if not password or any(c in password for c in "[]{}<>$*") or password.lower() in _NOT_VALUES:
                continue  # only a user, or a template: [[username]:[password]]@, {user}:{pass}@, :****@
            out.append(Finding(m.start(1), m.end(1), "url_credentials"))
    if " -u" in view or "--user" in view:
        for m in _CURL_USER.finditer(view):
            out.append(Finding(m.start(1), m.end(1), "basic_auth"))
    lowered = view.lower()
    if "bearer" in lowered or "basic" in lowered or "authorization" in lowered:
        for m in [*_AUTH_HEADER.finditer(view), *_TOKEN_HEADER.finditer(view)]:
            scheme, value = m.group(1).lower(), m.group(3)
            if not any(c.isdigit() for c in value) and not (len(value) >= 20 and entropy(value) >= 3.5):
                continue  # "bearer of bad news", "basic mean-pooling": a token has digits or is long and random
            if scheme == "basic":
                if not _is_basic_credentials(value):
                    continue
                kind = "basic_auth"
            else:
                kind = "bearer_token"
            out.append(Finding(m.start(3), m.end(3), kind))


def _is_basic_credentials(value: str) -> bool:
    """`Basic <b64>`: the base64 of `user:password` (RFC 7617)."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded
