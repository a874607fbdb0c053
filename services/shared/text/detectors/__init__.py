"""Where secrets and personal data sit in a text: the detectors behind `redact` (`find`).

Maintained libraries first, own rules only where none covers a kind (docs/corpus.md#redaction has the
table); each concern is a module of this package, and each detector runs only where a cheap prefilter
says it could match. The text is read through a same-length view with JSON escapes undone in place,
so a key inside a JSON string is seen with its real line breaks while every offset stays the original's.
"""

from __future__ import annotations

import re

from services.shared.text.detectors.assignments import _cli, _keywords, _prose_passwords
from services.shared.text.detectors.base import (
    KIND_CATEGORY,
    PII,
    PLACEHOLDER_RE,
    PRIORITY,
    SECRET,
    Finding,
    entropy,
    view_of,
)
from services.shared.text.detectors.high_entropy import (
    BARE_MIN_LEN,
    WORDLIKE_MAX,
    _aws_pairs,
    _high_entropy,
    looks_random,
    wordlike,
)
from services.shared.text.detectors.keys import _own_tokens, _plugins, _private_keys, _urls_and_headers
from services.shared.text.detectors.personal import _emails, _ibans, _ips, _national_ids, _ninos, _numbers, _phones

__all__ = [
    "BARE_MIN_LEN",
    "KIND_CATEGORY",
    "PII",
    "PLACEHOLDER_RE",
    "PRIORITY",
    "SECRET",
    "WORDLIKE_MAX",
    "Finding",
    "entropy",
    "find",
    "looks_random",
    "view_of",
    "wordlike",
]

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
