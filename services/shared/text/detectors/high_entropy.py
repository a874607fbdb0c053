"""The high-entropy rule, and the AWS secret access key next to its key ID.

`looks_random` decides whether a base64-alphabet token is a random key (long,
mixed case, not hex, not words, not sequential, not base64 of text);
`_high_entropy` applies it to the text's candidates outside public keys,
certificates and content hashes; `_aws_pairs` finds the 40-character secret on
an AWS key ID's line or the two after it.
"""

from __future__ import annotations

import base64
import binascii
import re

from detect_secrets.filters import heuristic

from services.shared.text.detectors.base import Finding, _line_bounds, entropy

# ----------------------------------------------------------------------------- high entropy

_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20,}={0,2}(?![A-Za-z0-9+/=_-])")
_HEXISH = re.compile(r"[0-9a-fA-F-]+")
# Content hashes and checksums are not secrets (sha256-..., h1:...=, sha512:...).
_HASH_PREFIX = re.compile(
    r"(?i)(?:sha(?:1|224|256|384|512)|md5|h1|blake2b?|integrity|etag|digest|checksum)[-:=]\s*[\"']?$"
)
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
    for (a, ta), (b, tb) in zip(pts, pts[1:], strict=False):
        if n <= b:
            return ta + (tb - ta) * (n - a) / (b - a)
    return pts[-1][1]


def wordlike(token: str) -> float:
    """Share of adjacent letter pairs (within camel/snake segments) that are common
    English bigrams: identifiers and paths score high, random keys about 0.2."""
    pairs = hits = 0
    for seg in _SEGMENT.findall(token):
        s = seg.lower()
        for a, b in zip(s, s[1:], strict=False):
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
_PUBLIC_BLOCK = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*(?:PUBLIC KEY|CERTIFICATE(?: REQUEST)?)-----.*?(?:-----END [A-Z0-9 ]+-----|\Z)",
    re.DOTALL,
)
_SSH_PUBLIC = re.compile(
    r"(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d+|sk-ssh-ed25519@openssh\.com"
    r"|sk-ecdsa-sha2-nistp256@openssh\.com) +$"
)


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
