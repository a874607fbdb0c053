"""Where secrets and personal data sit in a text: the detectors behind `redact`.

`find(text)` returns `Finding`s (start, end, kind) over `text`; `redact` merges
and replaces them. Each kind comes from the best maintained detector there is
for it, and the project's own rules cover only what no library does
(docs/corpus.md has the table and the reasons):

- **detect-secrets** (Yelp): its regex plugins find vendor tokens (AWS key IDs,
  Azure storage keys, Slack tokens and webhooks, Stripe, GitHub, GitLab, JWTs
  with their JSON check, OpenAI, SendGrid, npm, PyPI, Twilio, Discord,
  Mailchimp, Telegram, Square); its keyword grammar
  (`DENYLIST`, the quote and closing rules) is the base of the keyword
  assignments (`password=`, `secret:`, `"token": ...`), its heuristic filters
  (templated values, `$VAR`, indirect references such as `get_password()`,
  non-alphanumeric and sequential strings, id-like keys) veto values, and its
  Shannon entropy is the entropy of the high-entropy rule.
- **phonenumbers** (Google's libphonenumber): phone numbers, national and
  international, validated against the numbering plans.
- **python-stdnum**: IBAN (country length, BBAN format, mod-97), the Luhn check
  of card numbers, US SSN validity, national IDs (Aadhaar, PAN, NIR, DNI/NIE,
  codice fiscale, SIN, Steuer-ID, BSN).
- **ipaddress** (stdlib): which candidate addresses are real IPv4/IPv6.
- own rules: PEM block extent, URL credentials, Bearer/Basic headers, key
  shapes no plugin knows (Hugging Face, Google API, Anthropic, `sk-` project
  keys, GitHub fine-grained, Stripe test keys, npm outside .npmrc, ...),
  e-mail, UK NINO, card issuer ranges, phone candidates, the keyword
  grammar's value extent, its code/template/prose vetoes and multi-line
  values, shell-history forms (`mysql -p`, `sshpass`, `docker login -p`), the
  high-entropy rule's contexts, and the AWS secret next to its key ID.

Every detector runs only where a cheap prefilter (a substring or a C-speed
regex over the whole text) says it could match, so ordinary prose costs a
handful of scans.

The text is read through a *view* of the same length in which JSON escapes
are undone in place (`\\n` -> ` ` + newline, `\\"` -> ` "`), so a key pasted
inside a JSON string, or a raw JSONL line, is seen with its real line breaks
and quotes while every offset stays the one of the original text.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

import phonenumbers
from detect_secrets.filters import heuristic
from detect_secrets.plugins import keyword as ds_keyword
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
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
from stdnum import iban as std_iban
from stdnum import luhn as std_luhn
from stdnum.ca import sin as std_ca_sin
from stdnum.de import idnr as std_de_idnr
from stdnum.es import dni as std_es_dni
from stdnum.es import nie as std_es_nie
from stdnum.fr import nir as std_fr_nir
from stdnum.in_ import aadhaar as std_in_aadhaar
from stdnum.in_ import pan as std_in_pan
from stdnum.it import codicefiscale as std_it_cf
from stdnum.nl import bsn as std_nl_bsn
from stdnum.us import ssn as std_ssn

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
               "email": 30, "url_credentials": 29, "card": 31, "iban": 32, "us_ssn": 33, "uk_nino": 34, "national_id": 36, "ip": 35,
               "phone": 50}.items():
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


# ----------------------------------------------------------------------------- PEM blocks

# Own rule for the block's extent: detect-secrets' PrivateKeyDetector flags the
# BEGIN line only, and its header list lacks "ENCRYPTED PRIVATE KEY"; this
# pattern covers every header of that list (a unit test checks it).
_PEM = re.compile(
    r"-----BEGIN ([A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----.*?(?:-----END ([A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----|\Z)",
    re.DOTALL,
)
_PUTTY = re.compile(r"PuTTY-User-Key-File-\d:.*?(?:Private-MAC: *[0-9a-fA-F]+|\Z)", re.DOTALL)
_SSH2 = re.compile(r"---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----.*?(?:---- END SSH2 ENCRYPTED PRIVATE KEY ----|\Z)", re.DOTALL)


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
    _Plugin(GitLabTokenDetector(), _const("gitlab_token"),
            ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "GR1348941", "glcbt-", "glimt-", "glptt-", "glagent-", "gloas-"),
            _TOKEN),
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


_TRIGGERS = re.compile("|".join(sorted({re.escape(t) for p in _PLUGINS if not p.fold for t in p.triggers}, key=len, reverse=True)))
_FOLDED_TRIGGERS = re.compile("|".join(sorted({re.escape(t) for p in _PLUGINS if p.fold for t in p.triggers}, key=len, reverse=True)))


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


# ----------------------------------------------------------------------------- keyword assignments

# detect-secrets' keyword list plus what it lacks: token and API-key names, the
# short forms of passwords in env files (DB_PASS), credentials and passphrases.
_EXTRA_KEYWORDS = (
    r"(?<![a-z])pass(?![a-z])", r"passphrase", r"passcode", r"api[_-]?key", r"apikey", r"api[_-]?token",
    r"access[_-]?key", r"secret[_-]?key", r"(?<![a-z])token(?!iz)", r"credentials?", r"auth[_-]?token",
    r"access[_-]?token", r"refresh[_-]?token", r"requirepass", r"masterauth", r"client[_-]?secret", r"signing[_-]?key", r"encryption[_-]?key",
    r"master[_-]?key", r"kennwort", r"mot[_-]?de[_-]?passe",
)
_KEYWORD_ALT = "|".join(list(ds_keyword.DENYLIST) + list(_EXTRA_KEYWORDS))
_KEYWORD = re.compile(r"(?i)" + _KEYWORD_ALT)
# The prefilter: short literals every keyword above contains, searched in the lower-cased
# text (a plain alternation is 25x faster than the full one); a hit's whole name is then
# checked against `_KEYWORD`.
_KEYWORD_FAST = re.compile(r"pass|pwd|secret|key|token|cred|contrase|kennwort|mot.de|auth|masterauth")
_KEYWORD_FAST_I = re.compile(r"(?i)pass|pwd|secret|key|token|cred|contrase|kennwort|mot.de|auth|masterauth")
# An environment variable named *_KEY (AZURE_STORAGE_KEY, MAILGUN_KEY): a key, whatever the service.
_ENV_KEY_NAME = re.compile(r"[A-Z][A-Z0-9_]*_KEY")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-ñÑ")
# After NAME (its closing quote or bracket): the operator (the assignment forms of
# detect-secrets' keyword grammar), or one space before a CLI flag's value.
_AFTER_NAME = re.compile(r"[\"'`]?\]?(?P<op>\s*(?::=|=>|::|===?|!==?|:|=)\s*| +(?=\S))")
# Config files whose values follow a space: redis.conf (requirepass, masterauth), .netrc (password).
_SPACE_ASSIGNED = frozenset(("requirepass", "masterauth", "passwd"))
_NETRC = re.compile(r"(?m)^(?=.*\bmachine\b)(?=.*\blogin\b).*?\bpassword\s+(?P<v>\S+)")
# .NET appSettings: <add key="ApiKey" value="..."/>
_KEY_VALUE_ATTR = re.compile(
    r"(?i)\b(?:key|name)\s*=\s*[\"'](?P<k>[^\"']*(?:" + _KEYWORD_ALT + r")[^\"']*)[\"']\s+value\s*=\s*[\"'](?P<v>[^\"']+)[\"']"
)
_XML_SECRET = re.compile(
    r"(?i)<(?P<tag>[\w:.-]*(?:password|passwd|secret|token|api[_-]?key|private[_-]?key)[\w.-]*)>(?P<v>[^<\s]{4,})</(?P=tag)>"
)
# Names that hold a keyword but no secret: token counts, tokenizers, key types.
_NAME_STOP = re.compile(
    r"(?i)tokens\b|tokens_|_tokens|tokeniz|token_?(?:counts?|types?|ids?|len|length|limits?|usage|budget|index|bytes|bias|idx|"
    r"embed\w*|logprobs?|str|pos\w*|mask|level|span|stream|pool\w*|emb)(?![a-z])|"
    r"max_?token|num_?token|n_?token|keyword|keyboard|monkey|turkey|hotkey|keypair|keyfile|key_?file|"
    r"key_?path|password_?(?:file|path|policy|length|min|max|hash_algo|reset|field|hint|prompt|strength)|"
    r"secret_?(?:name|ref|file|path|id|arn|store|manager)|keys_?(?:path|dir)|passenger|passage|bypass|compass|"
    r"passive|passthrough|password_?changed|credentials?_?(?:file|path|provider|chain|source|type|helper)|"
    r"pass_?(?:through|rate|fail|count|k)\b|token_?endpoint|token_?url|_?is_|has_|needs_|use_|show_|"
    r"sort_?key|primary_?key|foreign_?key|public_?key|publishable_?key"
)
_CODE_ROOTS = frozenset(
    "self this cls config cfg conf settings os env environ args opts options params request req process ctx app "
    "props data user creds credentials secrets vault form payload body kwargs input values obj instance".split()
)
_NOT_VALUES = frozenset(
    "true false yes no on off none null nil undefined required optional empty str string int bytes bool text "
    "varchar char secretstr secretbytes any object number boolean password secret token key value redacted "
    "hidden masked omitted unset".split()
)
_TYPE_VALUE = re.compile(r"^(?:Optional|List|Union|SecretStr|str|bytes|String|&str|\*?string|\[\]byte)\b")
_PLACEHOLDER_VALUE = re.compile(r"(?i)^(?:your|my|the|insert|enter|put)[_ -]?\w*$|^x{3,}$|^\.{3,}$|^<.*>$|^%\(?\w+\)?s?$|^@@\w+@@$")
_CODE_AFTER = re.compile(r"\s*(?:[)\]|,]|->|[-+*/%&^<>]=?\s|=(?!=)|\bif\b|\belse\b|\bfor\b|\band\b|\bor\b)")
_UNQUOTED_END = re.compile(r"[\s,;}\])`]")
_QUERY_END = re.compile(r"[\s,;}\])`&#]")  # a value in a URL's query string ends at '&'



def _keyword_kind(name: str) -> str | None:
    n = name.lower()
    if _NAME_STOP.search(n):
        if "private_key_id" not in n and "private-key-id" not in n:
            return None
    if "private_key_id" in n or "private-key-id" in n or "privatekeyid" in n:
        return "private_key_id"
    if re.search(r"pass|pwd|contrase|kennwort|mot.de", n):
        return "password"
    if "aws" in n and "secret" in n:
        return "aws_secret_key"
    if "token" in n:
        return "token"
    if re.search(r"api.?key|apikey|access.?key|client.?key|auth.?key|service.?key|account.?key", n) or n.endswith("_key"):
        return "api_key"
    return "secret"


def _value_span(view: str, start: int, line_end: int, query: bool = False) -> tuple[int, int, bool, str]:
    """The value after an assignment: (start, end, quoted, what follows it)."""
    if start >= line_end:
        return start, start, False, ""
    q = view[start]
    if q in "bBrRuUfF" and view[start + 1 : start + 2] in ("'", '"') and start + 1 < line_end:
        start += 1  # b'...', r"...", f"...": a Python string literal
        q = view[start]
    if q in "\"'`":
        close = view.find(q, start + 1, line_end)
        end = line_end if close < 0 else close
        s, e = start + 1, end
        while s < e and view[s] == " ":
            s += 1
        while e > s and view[e - 1] == " ":  # the view's space before an escaped quote
            e -= 1
        return s, e, True, view[end + 1 : line_end]
    m = (_QUERY_END if query else _UNQUOTED_END).search(view, start, line_end)
    end = line_end if m is None else m.start()
    # A value may not end in a comma or closing bracket; it may hold '=', ':' and '#'.
    return start, end, False, view[end:line_end]


def _is_value(value: str, kind: str, name: str, line: str, quoted: bool, op: str, rest: str) -> bool:
    """Does `value`, assigned to `name`, look like a credential rather than code or prose?"""
    v = value.strip()
    if not v or v.lower() in _NOT_VALUES:
        return False
    if heuristic.is_templated_secret(v) or heuristic.is_prefixed_with_dollar_sign(v):
        return False
    if heuristic.is_not_alphanumeric_string(v) or _PLACEHOLDER_VALUE.match(v) or _TYPE_VALUE.match(v):
        return False
    if not quoted:
        if _CODE_AFTER.match(rest) and re.fullmatch(r"[A-Za-z_][\w.]*", v):
            return False  # an annotation or an expression: pm_pass: PatternMatcherPass) / x = a + b
        if op.strip() == "=" and op != "=" and sum(c.isdigit() for c in v) <= 1 \
                and re.fullmatch(r"[a-z_][a-z0-9_]*_[a-z0-9_]+|[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+", v):
            return False  # token_bytes = state_inner_size: a variable, in code
        if v[0] in "({[!" or "(" in v or "[" in v:
            return False  # a call, a literal, a tuple: code
        if heuristic.is_indirect_reference(f"{name} = {v}"):
            return False
        if v.startswith(("/", "./", "~/", "../")) and entropy(v) < 4.0:
            return False  # a path (PWD=/home/user)
    if "{{" in v or "${" in v or "%(" in v:
        return False
    dotted = v.split(".")
    if len(dotted) > 1 and all(re.fullmatch(r"[A-Za-z_]\w*", s) for s in dotted):
        if dotted[0].lower() in _CODE_ROOTS or any(k in dotted[-1].lower() for k in ("pass", "secret", "token", "key", "pwd")):
            return False  # self.password, settings.SECRET_KEY
    bare = v.lower().lstrip("-")
    last = re.split(r"[.\-]", name.lower().strip("-\"'"))[-1]
    if bare == last or bare == name.lower().strip("-\"'"):
        return False  # password=password (a keyword argument)
    if re.fullmatch(r"[A-Z][A-Z_]*_[A-Z_]+|[a-z]+(?:_[a-z]+){2,}", v):
        return False  # a constant's name: MAGIC_TOKEN = 'RUN_ENTRY'
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", v) and any(k in v for k in ("PASS", "SECRET", "TOKEN", "KEY", "PWD")):
        return False  # an environment variable's name: password: DB_PASSWORD
    if kind != "password" and kind != "private_key_id" and heuristic.is_likely_id_string(v, line):
        return False
    if heuristic.is_sequential_string(v) and len(v) < 12:
        return False
    if v.isdigit():
        return kind == "password" and len(v) >= 6
    if kind == "password":
        if len(v) < 4:
            return False
    elif kind == "private_key_id":
        return len(v) >= 16 and re.fullmatch(r"[0-9a-fA-F]+", v) is not None
    else:
        if len(v) < 8:
            return False
        if not quoted and v.isalpha() and v.islower() and len(v) < 16 and op.strip() in (":", ""):
            return False  # token: expired, secret: rotated
    # Prose: "Password: must be at least 8 characters" -- a plain lower-case word
    # followed by more words, after a colon or a spaced '='.
    if not quoted and re.fullmatch(r"[a-z]+", v) and re.match(r"\s+[a-z]+\b", rest) and op != "=":
        return False
    return True


# A line that is only a key (YAML): `  tls.key: |`, `- secret:`, `"private_key":`.
_YAML_KEY_LINE = re.compile(r"[ \t]*(?:- )?[\"']?[\w.-]+[\"']?[ \t]*:[ \t]*(?:[|>][+-]?\d*)?[ \t]*(?:#.*)?$")
_YAML_BLOCK = re.compile(r"^[|>][+-]?\d*\s*(?:#.*)?$")


def _keywords(view: str, lowered: str, out: list[Finding]) -> None:
    hits = _KEYWORD_FAST.finditer(lowered) if len(lowered) == len(view) else _KEYWORD_FAST_I.finditer(view)
    n = len(view)
    done = -1  # the end of the last name looked at: a name holding two keywords is read once
    for m in hits:
        if m.start() < done:
            continue
        ns, ne = m.start(), m.end()
        while ns > 0 and view[ns - 1] in _NAME_CHARS:
            ns -= 1
        while ne < n and view[ne] in _NAME_CHARS:
            ne += 1
        done = ne
        after = _AFTER_NAME.match(view, ne)
        if after is None or not (_KEYWORD.search(view, ns, ne) or _ENV_KEY_NAME.fullmatch(view, ns, ne)):
            continue
        if ns > 0 and view[ns - 1] in "{$%":
            continue  # ${DB_PASSWORD:?required}, {password}: a reference, not an assignment
        name, op = view[ns:ne], after.group("op")
        if op.strip() in ("==", "===", "!=", "!==") and view[after.end() : after.end() + 1] not in ("'", '"', "`"):
            continue  # password == hashed: a comparison with a variable
        if not op.strip() and not (name.startswith("--") or name.lower() in _SPACE_ASSIGNED):
            continue  # a space assignment only for CLI flags (--password x) and a few config files
        kind = _keyword_kind(name)
        if kind is None:
            continue
        line_start, line_end = _line_bounds(view, ns)
        s, e, quoted, rest = _value_span(view, after.end(), line_end, query=ns > 0 and view[ns - 1] in "?&")
        value = view[s:e]
        if not value.strip() or _YAML_BLOCK.match(value.strip()):
            # The value is on the following lines: YAML block scalars, a bare key then an indented value.
            if op.strip() == ":" and _YAML_KEY_LINE.match(view, line_start, line_end):
                _following_lines(view, line_start, line_end, kind, out)
            continue
        if _is_value(value, kind, name, view[line_start:line_end], quoted, op, rest):
            out.append(Finding(s, e, kind))
    if "value" in view:
        for m in _KEY_VALUE_ATTR.finditer(view):
            kind = _keyword_kind(m.group("k"))
            if kind and _is_value(m.group("v"), kind, m.group("k"), "", True, "=", ""):
                out.append(Finding(m.start("v"), m.end("v"), kind))
    if "machine" in view:
        for m in _NETRC.finditer(view):
            out.append(Finding(m.start("v"), m.end("v"), "password"))
    if "</" in view:
        for m in _XML_SECRET.finditer(view):
            kind = _keyword_kind(m.group("tag")) or "secret"
            out.append(Finding(m.start("v"), m.end("v"), kind))


def _following_lines(view: str, line_start: int, line_end: int, kind: str, out: list[Finding]) -> None:
    """The indented lines after `key:` / `key: |` (at most 64), or the single next
    line when it is one token: a value continued on the next line."""
    line = view[line_start:line_end]
    indent = len(line) - len(line.lstrip(" \t"))
    pos = line_end + 1
    taken = 0
    while pos < len(view) and taken < 64:
        nl = view.find("\n", pos)
        end = len(view) if nl < 0 else nl
        text = view[pos:end]
        stripped = text.strip()
        if not stripped:
            if taken:
                break
            pos = end + 1
            continue
        lead = len(text) - len(text.lstrip(" \t"))
        if lead <= indent:
            if taken == 0 and " " not in stripped and len(stripped) >= 8 and not stripped.endswith(":") \
                    and re.fullmatch(r"[A-Za-z0-9+/=_.~-]+", stripped):
                out.append(Finding(pos + lead, pos + lead + len(stripped), kind))
            break
        out.append(Finding(pos + lead, pos + lead + len(stripped), kind))
        taken += 1
        pos = end + 1


# Prose: "my password is Hunter2!" -- a value with a digit, a capital or a symbol.
_PROSE_PASSWORD = re.compile(
    r"(?i)\b(?:password|passphrase|passcode|pwd|pin code|wifi key|api key|token)\s+(?:is|was|would be|will be)\s*:?\s+"
    r"[`'\"]?(?P<v>[^\s`'\"]{6,})"
)


_PROSE_KEY = re.compile(r"(?i)\b(?:key|secret|token|credential)\s+(?:is|was)\s*:?\s+[`'\"]?(?P<v>[A-Za-z0-9+/=_.-]{16,})")


def _prose_passwords(view: str, out: list[Finding]) -> None:
    lowered = view.lower()
    if " is" not in lowered and " was" not in lowered:
        return
    for m in _PROSE_KEY.finditer(view):
        v = m.group("v").rstrip(".")
        if (len(v) >= 32 and _HEXISH.fullmatch(v) and not v.count("-")) or looks_random(v, context=True):
            out.append(Finding(m.start("v"), m.start("v") + len(v), "secret"))
    for m in _PROSE_PASSWORD.finditer(view):
        v = m.group("v").rstrip(".,;:!?)")
        if v.isalpha() and v.islower():
            continue
        if v.lower() in _NOT_VALUES or heuristic.is_templated_secret(v) or v[0] == "<":
            continue
        kind = "password" if "pass" in m.group(0).lower() or "pwd" in m.group(0).lower() or "pin" in m.group(0).lower() else "api_key"
        if "token" in m.group(0).lower()[: m.start("v") - m.start()]:
            kind = "token"
        out.append(Finding(m.start("v"), m.start("v") + len(v), kind))


_MYSQL_P = re.compile(r"(?<=\s)-p(?P<v>[^\s'\"]{4,}|'[^']+'|\"[^\"]+\")")
_DOCKER_P = re.compile(r"\blogin\b[^\n]*?\s(?:-p|--password)[ =](?P<v>'[^']+'|\"[^\"]+\"|[^\s'\"]+)")
_SSHPASS = re.compile(r"\bsshpass\s+-p\s*(?P<v>'[^']+'|\"[^\"]+\"|\S+)")


def _cli(view: str, out: list[Finding]) -> None:
    if "mysql" in view or "mariadb" in view:
        for m in _MYSQL_P.finditer(view):
            s, e = m.span("v")
            if view[s] in "'\"":
                s, e = s + 1, e - 1
            out.append(Finding(s, e, "password"))
    if "login" in view:
        for m in _DOCKER_P.finditer(view):
            s, e = m.span("v")
            if view[s] in "'\"":
                s, e = s + 1, e - 1
            if not view[s:e].startswith("$"):
                out.append(Finding(s, e, "password"))
    if "sshpass" in view:
        for m in _SSHPASS.finditer(view):
            s, e = m.span("v")
            if view[s] in "'\"":
                s, e = s + 1, e - 1
            out.append(Finding(s, e, "password"))


# ----------------------------------------------------------------------------- high entropy

_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20,}={0,2}(?![A-Za-z0-9+/=_-])")
_HEXISH = re.compile(r"[0-9a-fA-F-]+")
# Content hashes and checksums are not secrets (sha256-..., h1:...=, sha512:...).
_HASH_PREFIX = re.compile(r"(?i)(?:sha(?:1|224|256|384|512)|md5|h1|blake2b?|integrity|etag|digest|checksum)[-:=]\s*[\"']?$")
# English letter pairs that make up most of identifiers and words (the most frequent
# bigrams of Python's own prose and names); random strings hit about a fifth of them.
_HASH_TOKEN = re.compile(r"(?i)(?:sha(?:1|224|256|384|512)|md5|blake2b?)-")
_COMMON_BIGRAMS = frozenset(
    "se re in el th er st de en at or te lf on es he le et me ti ar nt co an al nd tr li ur ta ng ed io is it ra ef "
    "pa ro ri ex am tu as pe fo il ns fi na rn ce ct rt ot si ec la ne ma po no ss di rs ac ve pr om mp ou nc lo ca "
    "ch im od op cl ea ha ll ge ut ls to ty ke pt ts ul ai un em ic us ue ad ol va pl wi ep su hi lu yp up ho fr da "
    "sp ab ck mo ap ie ir oc xt ry tt bl so lt ag rg os oo pp rm ig bu if um id qu ld ob pi".split()
)
_SEGMENT = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
# Entropy floor by length: about the 0.2 % quantile of random base64 strings of
# that length (measured: 3.48 at 20, 3.75 at 24, 4.14 at 32, 4.34 at 40, 4.85 at 64, 5.08 at 88).
_ENTROPY_FLOOR = ((20, 3.40), (24, 3.68), (32, 4.05), (40, 4.25), (64, 4.75), (88, 5.00))
WORDLIKE_MAX = 0.5  # share of common bigrams above which a token reads as words
BARE_MIN_LEN = 24
_CONTEXT_HINT = re.compile(r"(?i)key|secret|token(?!iz)|passw|cred|auth|aws|api|sig")


def _entropy_floor(n: int) -> float:
    pts = _ENTROPY_FLOOR
    if n <= pts[0][0]:
        return pts[0][1]
    for (a, ta), (b, tb) in zip(pts, pts[1:]):
        if n <= b:
            return ta + (tb - ta) * (n - a) / (b - a)
    return pts[-1][1]


def wordlike(token: str) -> float:
    """Share of adjacent letter pairs (within camel/snake segments) that are common
    English bigrams: identifiers and paths score high, random keys about 0.2."""
    pairs = hits = 0
    for seg in _SEGMENT.findall(token):
        s = seg.lower()
        for a, b in zip(s, s[1:]):
            pairs += 1
            hits += (a + b) in _COMMON_BIGRAMS
    return hits / pairs if pairs else 0.0


def _decodes_to_text(token: str) -> bool:
    """Base64 of ordinary text (docs, examples) is not a secret."""
    core = token.rstrip("=")
    if len(core) < 16:
        return False
    for alt in (None, b"-_"):
        try:
            raw = base64.b64decode(core + "=" * (-len(core) % 4), altchars=alt, validate=True)
        except (binascii.Error, ValueError):
            continue
        if not raw:
            continue
        printable = sum(32 <= b < 127 or b in (9, 10, 13) for b in raw)
        if printable / len(raw) >= 0.95:
            return True
    return False


def looks_random(token: str, *, context: bool) -> bool:
    """The high-entropy rule: a token of the base64 alphabet that is long, mixes
    cases (and digits), is not hex, not words, not sequential and not base64 of text."""
    n = len(token)
    if n < (20 if context else BARE_MIN_LEN):
        return False
    if _HEXISH.fullmatch(token):
        return False  # git SHAs, digests, UUIDs: hex is redacted only after a secret's keyword
    upper = any(c.isupper() for c in token)
    lower = any(c.islower() for c in token)
    digit = any(c.isdigit() for c in token)
    if not (upper and lower and (digit or n >= 32)):
        return False
    if entropy(token) < _entropy_floor(n) - (0.15 if context else 0.0):
        return False
    if wordlike(token) > (WORDLIKE_MAX + (0.1 if context else 0.0)):
        return False
    if heuristic.is_sequential_string(token):
        return False
    if "/" in token:
        # A path or a model ID (HuggingFaceTB/Llama-2): most of it in letter-only words.
        parts = re.split(r"[/_-]", token)
        wordy = sum(len(p) for p in parts if len(p) >= 4 and p.isalpha() and wordlike(p) >= 0.6)
        if wordy >= 0.5 * n:
            return False
    return not _decodes_to_text(token)


# Public keys and certificates are meant to be shared: their base64 is not a secret.
_PUBLIC_BLOCK = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*(?:PUBLIC KEY|CERTIFICATE(?: REQUEST)?)-----.*?(?:-----END [A-Z0-9 ]+-----|\Z)", re.DOTALL)
_SSH_PUBLIC = re.compile(r"(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d+|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com) +$")


def _high_entropy(view: str, out: list[Finding]) -> None:
    public = [m.span() for m in _PUBLIC_BLOCK.finditer(view)] if "-----BEGIN" in view else []
    for m in _CANDIDATE.finditer(view):
        token = m.group(0)
        s = m.start()
        if public and any(a <= s < b for a, b in public):
            continue
        if _SSH_PUBLIC.search(view, max(0, s - 40), s):
            continue
        if _HASH_PREFIX.search(view, max(0, s - 12), s) or _HASH_TOKEN.match(token):
            continue
        line_start, _ = _line_bounds(view, s)
        context = _CONTEXT_HINT.search(view, max(line_start, s - 48), s) is not None
        if looks_random(token, context=context):
            out.append(Finding(s, m.end(), "high_entropy"))


# An AWS secret access key (40 base64 characters) on the line of its key ID or the two after.
_AWS_SECRET_NEAR = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{40}(?![A-Za-z0-9+/=])")


def _aws_pairs(view: str, found: list[Finding], out: list[Finding]) -> None:
    for f in [f for f in found if f.kind == "aws_access_key_id"]:
        _, end = _line_bounds(view, f.start)
        for _ in range(2):
            nxt = view.find("\n", end + 1)
            end = len(view) if nxt < 0 else nxt
        for m in _AWS_SECRET_NEAR.finditer(view, f.end, end):
            token = m.group(0)
            if not _HEXISH.fullmatch(token) and not token.isalpha() and entropy(token) >= 3.5:
                out.append(Finding(m.start(), m.end(), "aws_secret_key"))


# ----------------------------------------------------------------------------- personal data

_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_IPV6 = re.compile(
    r"(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|\d{1,3}(?:\.\d{1,3}){3})?(?![0-9A-Za-z:])"
)
_IPV4 = re.compile(r"(?<![0-9A-Za-z.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![0-9]|\.[0-9])")
_VERSION_PREFIX = re.compile(
    r"(?i)(?:\bv|\bversion|\bver|\brelease|\bbuild|\bfirmware|\bkernel|\bchrome|\bfirefox|\bwindows|\bpython|==|>=|<=|~=)\s?$"
)
_CARD = re.compile(
    r"(?<![\w-])(?:[2-6]\d{12,18}|[2-6]\d{3}([ -])\d{4}\1\d{4}\1\d{1,7}|3\d{3}([ -])\d{6}\2\d{4,5})(?![\w]|-\d)"
)
_SSN = re.compile(r"(?<![\w-])\d{3}([- ])\d{2}\1\d{4}(?![\w]|-\d)")
_SSN_KEYWORD = re.compile(r"(?i)\b(?:ssn|social security(?: number| no\.?| #)?)\s*[:#]?\s*(\d{9})\b")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,32}")
# UK National Insurance number (HMRC's format): no library covers it.
_NINO = re.compile(
    r"(?<![A-Za-z0-9])(?!BG|GB|KN|NK|NT|TN|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D](?![A-Za-z0-9])"
)
_PHONE_CANDIDATE = re.compile(
    r"(?<![\w+./#-])(?:\+ ?|00 ?)?\(?\d(?:(?:[ \u00a0./-]|\) ?| ?\()?\d){6,15}(?![\w]|[-/]\d|\.\d)"
)
_PHONE_CONTEXT = re.compile(r"(?i)(?:phone|tel|mobile|cell|call|text me|sms|whatsapp|fax|contact|dial|ring|reach)\b[^\n]{0,24}$")
# The North American shape (415) 555-0132 / 415-555-0132 / 415.555.0132 is a phone number even in
# an area code not assigned yet: the plan's lengths (POSSIBLE) suffice, as for '+' numbers.
_NANP_SHAPE = re.compile(r"^(?:\([2-9]\d{2}\) ?|[2-9]\d{2}([-.]))[2-9]\d{2}(?(1)\1|[-.])\d{4}$")
_ZIP4 = re.compile(r"^\d{5}-\d{4}$")  # US ZIP+4
_DECIMAL = re.compile(r"^\d+\.\d+$|^0\.")  # 0.742004, 3.14159265
_ISBN_PREFIX = re.compile(r"(?i)\bISBN(?:-1[03])?:?\s*$")
_DATE_START = re.compile(r"^(?:\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{4})")
_ZERO_REGIONS = ("GB", "DE", "FR", "IN", "IT", "NL", "AU", "JP", "BR", "CH", "AT", "BE")
_OTHER_REGIONS = ("US", "IN", "IT", "ES", "PL", "CN")


def _emails(view: str, out: list[Finding]) -> None:
    if "@" not in view:
        return
    for m in _EMAIL.finditer(view):
        if m.start() > 0 and view[m.start() - 1] in ":/":
            continue  # user:password@host is a URL's userinfo (url_credentials)
        local = m.group(0).split("@", 1)[0]
        if local == "git" and view[m.end() : m.end() + 1] == ":":
            continue  # git@github.com:org/repo.git is a remote, not a person
        out.append(Finding(m.start(), m.end(), "email"))


def _ips(view: str, out: list[Finding]) -> None:
    if ":" in view:
        for m in _IPV6.finditer(view):
            cand = m.group(0)
            groups = [g for g in re.split(r"[:.]", cand) if g]
            if len(groups) < 3 and sum(len(g) for g in groups) < 5:
                continue  # a[::2], 1::2: slices, not addresses
            try:
                addr = ipaddress.IPv6Address(cand)
            except ValueError:
                continue
            if not (addr.is_loopback or addr.is_unspecified):
                out.append(Finding(m.start(), m.end(), "ip"))
    if "." in view:
        for m in _IPV4.finditer(view):
            parts = [int(g) for g in m.groups()]
            if any(p > 255 for p in parts):
                continue
            if _VERSION_PREFIX.search(view, max(0, m.start() - 12), m.start()):
                continue
            if parts[0] == 127 or parts == [0, 0, 0, 0]:
                continue  # loopback and "any": the local machine, nobody's address
            out.append(Finding(m.start(), m.end(), "ip"))


def _card_iin(d: str) -> bool:
    """The card networks' issuer ranges and lengths (ISO/IEC 7812): Visa, Mastercard,
    Amex, Discover, JCB, Diners, UnionPay, Maestro. A compact timestamp or an order
    number of 13-19 digits mostly falls outside them."""
    n, p2, p3, p4 = len(d), int(d[:2]), int(d[:3]), int(d[:4])
    if d[0] == "4":
        return n in (13, 16, 19)
    if 51 <= p2 <= 55 or 2221 <= p4 <= 2720:
        return n == 16
    if p2 in (34, 37):
        return n == 15
    if d.startswith("6011") or p2 in (62, 65) or 644 <= p3 <= 649:
        return 16 <= n <= 19
    if 3528 <= p4 <= 3589:
        return 16 <= n <= 19
    if p2 in (36, 38, 39) or 300 <= p3 <= 305:
        return 14 <= n <= 19
    if p2 in (50, 56, 57, 58) or 60 <= p2 <= 69:
        return 12 <= n <= 19
    return False


def _numbers(view: str, out: list[Finding]) -> None:
    for m in _CARD.finditer(view):
        digits = re.sub(r"[ -]", "", m.group(0))
        if 13 <= len(digits) <= 19 and _card_iin(digits) and std_luhn.is_valid(digits):
            out.append(Finding(m.start(), m.end(), "card"))
    if "-" in view or " " in view:
        for m in _SSN.finditer(view):
            if std_ssn.is_valid(m.group(0).replace(" ", "-")):
                out.append(Finding(m.start(), m.end(), "us_ssn"))
    lowered = view.lower()
    if "ssn" in lowered or "social security" in lowered:
        for m in _SSN_KEYWORD.finditer(view):
            if std_ssn.is_valid(m.group(1)):
                out.append(Finding(m.start(1), m.end(1), "us_ssn"))


def _ibans(view: str, out: list[Finding]) -> None:
    for m in _IBAN.finditer(view):
        cand = m.group(0)
        # The longest prefix that is a valid IBAN (the pattern may run on into following words).
        best = compact = 0
        for i, c in enumerate(cand):
            if c == " ":
                continue
            compact += 1
            # mod 97-10 and the registry's BBAN structure; not the national check digits, which a
            # typed or partly made-up IBAN may lack while it still identifies an account holder
            if 15 <= compact <= 34 and std_iban.is_valid(cand[: i + 1], check_country=False):
                best = i + 1
        if best:
            out.append(Finding(m.start(), m.start() + best, "iban"))


def _ninos(view: str, out: list[Finding]) -> None:
    for m in _NINO.finditer(view):
        out.append(Finding(m.start(), m.end(), "uk_nino"))


# National identity numbers, each validated by python-stdnum (check digits, ranges).
# Formats that are specific on their own are matched anywhere; bare digit runs
# only after their name, which a person writes next to them.
_NATIONAL_IDS: tuple[tuple[str | None, re.Pattern[str], Callable[[str], bool]], ...] = (
    (None, re.compile(r"(?<![\d-])[2-9]\d{3} \d{4} \d{4}(?![\d-])"), std_in_aadhaar.is_valid),
    ("aadhaar", re.compile(r"(?i)aadhaar[^\n\d]{0,20}(\d{12})\b"), std_in_aadhaar.is_valid),
    (None, re.compile(r"(?<![A-Za-z0-9])[A-Z]{3}[ABCFGHLJPT][A-Z]\d{4}[A-Z](?![A-Za-z0-9])"), std_in_pan.is_valid),
    (None, re.compile(r"(?<![\d])[12] ?\d{2} ?\d{2} ?(?:\d{2}|2[AB]) ?\d{3} ?\d{3} ?\d{2}(?!\d)"), std_fr_nir.is_valid),
    (None, re.compile(r"(?<![A-Za-z0-9])\d{8}-?[A-Z](?![A-Za-z0-9])"), std_es_dni.is_valid),
    (None, re.compile(r"(?<![A-Za-z0-9])[XYZ]-?\d{7}-?[A-Z](?![A-Za-z0-9])"), std_es_nie.is_valid),
    (None, re.compile(r"(?<![A-Za-z0-9])[A-Z]{6}\d{2}[A-EHLMPR-T]\d{2}[A-Z]\d{3}[A-Z](?![A-Za-z0-9])"), std_it_cf.is_valid),
    ("sin", re.compile(r"(?i)\b(?:sin|social insurance(?: number)?)\b[^\n\d]{0,12}(\d{3}[- ]?\d{3}[- ]?\d{3})\b"), std_ca_sin.is_valid),
    ("steuer", re.compile(r"(?i)\b(?:steuer-?id(?:entifikationsnummer)?|idnr|tax id)\b[^\n\d]{0,12}(\d{2} ?\d{3} ?\d{3} ?\d{3})\b"), std_de_idnr.is_valid),
    ("bsn", re.compile(r"(?i)\bbsn\b[^\n\d]{0,12}(\d{9})\b"), std_nl_bsn.is_valid),
)


def _national_ids(view: str, out: list[Finding]) -> None:
    lowered: str | None = None
    for hint, pattern, valid in _NATIONAL_IDS:
        if hint is not None:
            lowered = view.lower() if lowered is None else lowered
            if hint not in lowered and not (hint == "sin" and "social insurance" in lowered) \
                    and not (hint == "steuer" and ("idnr" in lowered or "tax id" in lowered)):
                continue
        for m in pattern.finditer(view):
            g = 1 if pattern.groups else 0
            if valid(m.group(g)):
                out.append(Finding(m.start(g), m.end(g), "national_id"))


def _phones(view: str, out: list[Finding]) -> None:
    for m in _PHONE_CANDIDATE.finditer(view):
        cand = m.group(0)
        s = m.start()
        if _DATE_START.match(cand) or _DECIMAL.match(cand.lstrip("(")) or _ZIP4.match(cand):
            continue
        if "/" in cand and "." in cand:
            continue  # a DOI (10.1137/140973463), a path of numbers
        if re.fullmatch(r"\d{1,3}(?: 000)+", cand):
            continue  # 256 000 000: thousands
        if _VERSION_PREFIX.search(view, max(0, s - 12), s) or _ISBN_PREFIX.search(view, max(0, s - 12), s):
            continue
        plus = cand[0] == "+" or cand.startswith("00")
        if len(re.findall(r"\d+", cand)) > (6 if plus else 5):
            continue  # 10 20 30 40 50 60: a list of numbers
        zero = cand.lstrip("(")[:1] == "0"
        separated = any(c in " .-()\u00a0" for c in cand.strip())
        context = _PHONE_CONTEXT.search(view, max(0, s - 40), s) is not None
        if not (plus or separated or context) and not (zero and len(cand) >= 9):
            continue  # a bare digit run (an order number, a timestamp, a short SHA) is not a phone number
        if cand.startswith("00"):
            regions: tuple[str, ...] = ("GB",)  # 00 is the international prefix outside North America
        elif plus:
            regions = ("US",)  # international: the region does not matter
        elif zero:
            regions = _ZERO_REGIONS
        else:
            regions = _OTHER_REGIONS
        # The matcher sees a little context after the candidate (its time-stamp rules read it).
        window = view[s : min(len(view), m.end() + 8)]
        found = False
        for region in regions:
            hits = [h for h in phonenumbers.PhoneNumberMatcher(window, region, leniency=phonenumbers.Leniency.VALID)
                    if h.start < len(cand)]
            if hits:
                out.extend(Finding(s + h.start, s + h.end, "phone") for h in hits)
                found = True
                break
        if not found and (plus or (separated and context) or _NANP_SHAPE.match(cand)):
            # An international number ('+' and a country code), or one after "Tel:", "phone", ...:
            # the numbering plan's length rules suffice (a range not yet assigned is still a number).
            for region in regions[:1] if plus else regions:
                hits = [h for h in phonenumbers.PhoneNumberMatcher(window, region, leniency=phonenumbers.Leniency.POSSIBLE)
                        if h.start < len(cand)]
                if hits:
                    out.extend(Finding(s + h.start, s + h.end, "phone") for h in hits)
                    break


# ----------------------------------------------------------------------------- all

_HAS_DIGIT = re.compile(r"\d")


def find(view: str) -> list[Finding]:
    """Every finding over `view` (see `view_of`), unmerged."""
    out: list[Finding] = []
    lowered = view.lower()
    _private_keys(view, out)
    _plugins(view, lowered, out)
    _own_tokens(view, out)
    _aws_pairs(view, out, out)
    _urls_and_headers(view, out)
    _keywords(view, lowered, out)
    _prose_passwords(view, out)
    _cli(view, out)
    _high_entropy(view, out)
    _emails(view, out)
    if _HAS_DIGIT.search(view) is None:
        return out
    _ips(view, out)
    _numbers(view, out)
    _ibans(view, out)
    _ninos(view, out)
    _national_ids(view, out)
    _phones(view, out)
    return out
