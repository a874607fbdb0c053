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

The rules live in the modules of this package, one concern each; this module
runs them all (`find`) and re-exports the names its callers use:

- `base`: the kinds (`KIND_CATEGORY`, `PRIORITY`), `Finding`, `PLACEHOLDER_RE`,
  the view (`view_of`) and the helpers every detector shares (`entropy`, ...);
- `keys`: PEM blocks, detect-secrets' vendor plugins, the own token shapes,
  URL credentials and Authorization headers;
- `assignments`: keyword assignments (`password=`, YAML, XML, .netrc), prose
  passwords and shell-history forms;
- `high_entropy`: the high-entropy rule and the AWS secret next to its key ID;
- `personal`: e-mail, IPs, cards, US SSN, IBAN, UK NINO, national IDs, phones.
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
