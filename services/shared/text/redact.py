"""Redaction of secrets and personal data into typed placeholders.

`redact(text)` returns the redacted text and the number of replacements per
kind (only kinds that occurred appear in the dict). It is pure and
deterministic; every string the corpus step writes -- records, logs, errors,
rejected-line examples, the manifest -- passes through it first, and so do
the rejected-line examples of the profile.

Kinds, placeholders and rules (the order below is the order of application;
an earlier kind wins where two overlap, and placeholders never match a later
rule because they contain no digits, '@' or ':'):

- private_key `<PRIVATE_KEY>`: a PEM block `-----BEGIN ... PRIVATE KEY-----`
  through its END line; an unterminated block is redacted to the end of text.
- url_with_credentials `<URL_WITH_CREDENTIALS>`: a URL whose authority holds
  `user[:password]@`. The whole URL is replaced, host included: an internal
  host name next to a leaked password is itself worth hiding, and a partial
  rewrite would keep half of a secret whose end the regex cannot be sure of.
- secret `<SECRET>`: JWTs (`eyJ...` header and payload, dot separated),
  `sk-...` keys (OpenAI/Anthropic style, >= 16 characters after `sk-`),
  AWS access key IDs (`AKIA`/`ASIA` + 16), GitHub tokens (`ghp_`, `gho_`,
  `ghu_`, `ghs_`, `ghr_`, `github_pat_`), Slack tokens (`xox?-`), Google API
  keys (`AIza` + 35), Stripe keys (`sk_live_`, `rk_test_`, ...), and the token
  after `Bearer ` (the word `Bearer` stays; the token must be >= 16 characters
  and hold a digit or one of `._-+/=`, so "bearer of bad news" stays).
  Generic `password = ...` assignments are NOT redacted: in code corpora they
  are mostly variable names and calls, and a rule for them would eat code.
- email `<EMAIL>`.
- ip `<IP>`: IPv6 (validated with `ipaddress`, so times like 12:30:45, MAC
  addresses and C++ `std::vector` stay) and IPv4 (four dot-separated numbers
  0..255). Version rule: a dotted quad preceded by `v`, `V`, `version`,
  `ver`, `release`, `==`, `>=`, `<=`, `~=` or `@` (optionally with a space)
  stays, as do shapes with fewer or more than four parts (1.2.3, 1.2.3.4.5)
  and quads with a part above 255. A bare 1.2.3.4 is redacted: the rule errs
  on the side of hiding an address.
- card `<CARD>`: 13 to 19 digits starting with 2-6 (the payment-card
  industry ranges), bare or in the printed groupings 4-4-4-(1..7) and Amex
  4-6-5 with one consistent space or dash, passing the Luhn check. A 16-digit
  number failing Luhn stays, and so does a list of small numbers.
- ssn `<SSN>`: US social security numbers `AAA-GG-SSSS` with the invalid
  ranges excluded (area 000, 666, 900-999; group 00; serial 0000), and nine
  bare digits right after the words SSN / social security (number).
  Dates (2024-01-15) have another shape and stay.
- phone `<PHONE>`: international numbers starting with `+` (8-15 digits,
  separators allowed) and North-American numbers `(555) 123-4567`,
  `555-123-4567`, `555.123.4567`, `555 123 4567`. Bare digit runs
  (5551234567), dates and ordinary numbers stay.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any

# Placeholders per kind; the manifest reports counts under these kind names.
PLACEHOLDERS: dict[str, str] = {
    "private_key": "<PRIVATE_KEY>",
    "url_with_credentials": "<URL_WITH_CREDENTIALS>",
    "secret": "<SECRET>",
    "email": "<EMAIL>",
    "ip": "<IP>",
    "card": "<CARD>",
    "ssn": "<SSN>",
    "phone": "<PHONE>",
}
KINDS: tuple[str, ...] = tuple(PLACEHOLDERS)

_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)",
    re.DOTALL,
)
# scheme://userinfo@host...: userinfo has no '/', '@' or whitespace.
_URL_WITH_CREDENTIALS = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]+(?::[^\s/@]*)?@[^\s<>\"']+"
)
_SECRET_PATTERNS: tuple[re.Pattern[str], ...] = (
    # JWT: base64url JSON header and payload (both start '{"' -> 'eyJ').
    re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    re.compile(r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{16,}"),
    re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}"),
)
_BEARER = re.compile(r"(?i)(\bbearer\s+)([A-Za-z0-9._~+/=-]{16,})")
_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
# IPv6 candidates: hex groups and colons (an IPv4 tail allowed), validated by ipaddress.
_IPV6_CANDIDATE = re.compile(
    r"(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|\d{1,3}(?:\.\d{1,3}){3})?(?![0-9A-Za-z:])"
)
_IPV4 = re.compile(r"(?<![0-9A-Za-z.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![0-9]|\.[0-9])")
_VERSION_PREFIX = re.compile(r"(?i)(?:\bv|\bversion|\bver|\brelease|==|>=|<=|~=|@)\s?$")
# Bare 13-19 digits, or the printed groupings (4-4-4-x, Amex 4-6-5) with one
# consistent separator: free spacing would chain lists of small numbers.
_CARD = re.compile(
    r"(?<![\d-])(?:[2-6]\d{12,18}|[2-6]\d{3}([ -])\d{4}\1\d{4}\1\d{1,7}|3\d{3}([ -])\d{6}\2\d{4,5})(?![\d]|-\d)"
)
_SSN = re.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d]|-\d)")
_SSN_KEYWORD = re.compile(r"(?i)(\b(?:ssn|social security(?: number| no\.?)?)\s*[:#]?\s*)(\d{9})\b")
_PHONE_INTL = re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,5}(?![\d])")
_PHONE_NANP = re.compile(r"(?<![\w.+-])(?:\(\d{3}\)\s?|\d{3}[-. ])\d{3}[-. ]\d{4}(?![\d]|[-.]\d)")


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _sub(
    pattern: re.Pattern[str],
    text: str,
    kind: str,
    counts: dict[str, int],
    keep: Callable[[re.Match[str]], str | None] | None = None,
) -> str:
    """Replace matches by the kind's placeholder; `keep` may veto (return the
    text to keep) or return a custom replacement."""
    placeholder = PLACEHOLDERS[kind]

    def repl(m: re.Match[str]) -> str:
        if keep is not None:
            custom = keep(m)
            if custom is not None:
                if custom != m.group(0):
                    counts[kind] = counts.get(kind, 0) + 1
                return custom
        counts[kind] = counts.get(kind, 0) + 1
        return placeholder

    return pattern.sub(repl, text)


def _bearer(m: re.Match[str]) -> str:
    token = m.group(2)
    if any(c.isdigit() or c in "._-+/=" for c in token):
        return m.group(1) + PLACEHOLDERS["secret"]
    return m.group(0)


def _ipv6(m: re.Match[str]) -> str | None:
    cand = m.group(0)
    try:
        ipaddress.IPv6Address(cand)
    except ValueError:
        return cand
    return None


def _make_ipv4_keep(text: str) -> Callable[[re.Match[str]], str | None]:
    def keep(m: re.Match[str]) -> str | None:
        if any(int(g) > 255 for g in m.groups()):
            return m.group(0)
        # Only the few characters before the quad matter ("version 1.2.3.4").
        if _VERSION_PREFIX.search(text[max(0, m.start() - 12) : m.start()]):
            return m.group(0)
        return None

    return keep


def _card(m: re.Match[str]) -> str | None:
    digits = re.sub(r"[ -]", "", m.group(0))
    if 13 <= len(digits) <= 19 and _luhn_ok(digits):
        return None
    return m.group(0)


def _phone_intl(m: re.Match[str]) -> str | None:
    n = sum(c.isdigit() for c in m.group(0))
    return None if 8 <= n <= 15 else m.group(0)


def redact(text: str) -> tuple[str, dict[str, int]]:
    """Return `text` with every detected secret or personal datum replaced by
    its typed placeholder, and the count of replacements per kind (kinds with
    no replacement are absent). Idempotent: redact(redact(t)[0]) finds nothing."""
    counts: dict[str, int] = {}
    if not text:
        return text, counts
    if "PRIVATE KEY-----" in text:
        text = _sub(_PRIVATE_KEY, text, "private_key", counts)
    if "://" in text and "@" in text:
        text = _sub(_URL_WITH_CREDENTIALS, text, "url_with_credentials", counts)
    for pattern in _SECRET_PATTERNS:
        text = _sub(pattern, text, "secret", counts)
    text = _sub(_BEARER, text, "secret", counts, keep=_bearer)
    if "@" in text:
        text = _sub(_EMAIL, text, "email", counts)
    if not any(c.isdigit() for c in text) and "::" not in text:
        return text, counts
    if ":" in text:
        text = _sub(_IPV6_CANDIDATE, text, "ip", counts, keep=_ipv6)
    text = _sub(_IPV4, text, "ip", counts, keep=_make_ipv4_keep(text))
    text = _sub(_CARD, text, "card", counts, keep=_card)
    text = _sub(_SSN, text, "ssn", counts)
    text = _sub(
        _SSN_KEYWORD, text, "ssn", counts, keep=lambda m: m.group(1) + PLACEHOLDERS["ssn"]
    )
    if "+" in text:
        text = _sub(_PHONE_INTL, text, "phone", counts, keep=_phone_intl)
    text = _sub(_PHONE_NANP, text, "phone", counts)
    return text, counts


def merge_counts(into: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    """Add `more` into `into` (in place) and return it."""
    for kind, n in more.items():
        into[kind] = into.get(kind, 0) + n
    return into


def redact_value(value: Any, counts: dict[str, int] | None = None) -> tuple[Any, dict[str, int]]:
    """Redact every string inside a JSON-like value (dict keys stay: they are
    schema, not data). Returns the new value and the counts per kind."""
    counts = {} if counts is None else counts
    if isinstance(value, str):
        out, c = redact(value)
        merge_counts(counts, c)
        return out, counts
    if isinstance(value, dict):
        return {k: redact_value(v, counts)[0] for k, v in value.items()}, counts
    if isinstance(value, (list, tuple)):
        return [redact_value(v, counts)[0] for v in value], counts
    return value, counts
