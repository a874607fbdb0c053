"""What every detector shares: the kinds, a finding, the view and the helpers.

`KIND_CATEGORY` names each kind's placeholder category and `PRIORITY` decides
which kind names a merged span (`redact` reads both); `Finding` is what every
detector appends; `view_of` gives the text the detectors read (JSON escapes
undone in place, offsets unchanged); `entropy`, `_extend`, `_occurrences` and
`_line_bounds` are the small helpers the secret and personal-data rules use.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

SECRET, PII = "SECRET", "PII"

# kind -> category. The placeholder of a kind is `<CATEGORY:kind>`; the manifest
# counts under these names. Order: the documentation's order.
KIND_CATEGORY: dict[str, str] = {
    "private_key": SECRET,
    "private_key_id": SECRET,
    "aws_access_key_id": SECRET,
    "aws_secret_key": SECRET,
    "azure_storage_key": SECRET,
    "github_token": SECRET,
    "gitlab_token": SECRET,
    "slack_token": SECRET,
    "slack_webhook": SECRET,
    "stripe_key": SECRET,
    "openai_key": SECRET,
    "anthropic_key": SECRET,
    "huggingface_token": SECRET,
    "google_api_key": SECRET,
    "sendgrid_key": SECRET,
    "npm_token": SECRET,
    "pypi_token": SECRET,
    "twilio_key": SECRET,
    "discord_token": SECRET,
    "mailchimp_key": SECRET,
    "telegram_token": SECRET,
    "square_secret": SECRET,
    "jwt": SECRET,
    "url_credentials": SECRET,
    "bearer_token": SECRET,
    "basic_auth": SECRET,
    "password": SECRET,
    "api_key": SECRET,
    "token": SECRET,
    "secret": SECRET,
    "high_entropy": SECRET,
    "email": PII,
    "ip": PII,
    "card": PII,
    "us_ssn": PII,
    "iban": PII,
    "uk_nino": PII,
    "national_id": PII,
    "phone": PII,
}

# Where findings overlap, the union is replaced under the kind listed first here:
# a specific detector names a span better than a context rule or the entropy rule.
_PRIORITY: dict[str, int] = {k: i for i, k in enumerate(KIND_CATEGORY)}
for _k, _p in {"password": 40, "private_key_id": 41, "api_key": 42, "token": 43, "secret": 44, "high_entropy": 60,
               "email": 30, "url_credentials": 29, "card": 31, "iban": 32, "us_ssn": 33, "uk_nino": 34,
               "national_id": 36, "ip": 35, "phone": 50}.items():
    _PRIORITY[_k] = _p
PRIORITY = _PRIORITY


class Finding(NamedTuple):
    start: int
    end: int
    kind: str


PLACEHOLDER_RE = re.compile(r"<(?:SECRET|PII):[a-z0-9_]+>")

# ----------------------------------------------------------------------------- the view

_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
# The quote keeps its place and the backslash becomes a space after it, so `\"key\": \"v\"`
# reads `" key" : " v" ` (a quoted name, a quoted value) and a line break stays a line break.
_ESCAPE_MAP = {"n": " \n", "r": " \n", "t": "  ", '"': '" ', "\\": "  ", "'": "' "}


def view_of(text: str) -> str:
    """`text` with JSON escapes undone in place (same length, same offsets)."""
    if "\\" not in text:
        return text
    return _ESCAPE.sub(lambda m: _ESCAPE_MAP.get(m.group(1), "\\" + m.group(1)), text)


# ----------------------------------------------------------------------------- helpers

_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-")
_ENTROPY = Base64HighEntropyString()


def entropy(value: str) -> float:
    """Shannon entropy over the base64 alphabet (detect-secrets' own computation)."""
    return _ENTROPY.calculate_shannon_entropy(value)


def _extend(view: str, start: int, end: int, chars: frozenset[str] | str) -> int:
    """Grow `end` over following characters of `chars`: a plugin pattern of fixed
    length must not leave the tail of a longer token behind."""
    n = len(view)
    while end < n and view[end] in chars:
        end += 1
    return end


def _occurrences(view: str, value: str) -> Iterable[int]:
    if not value:
        return
    i = view.find(value)
    while i >= 0:
        yield i
        i = view.find(value, i + len(value))


def _line_bounds(view: str, pos: int) -> tuple[int, int]:
    start = view.rfind("\n", 0, pos) + 1
    end = view.find("\n", pos)
    return start, (len(view) if end < 0 else end)
