"""Masking the values of secret-bearing arguments in everything specdec shows, records or publishes.

The launch gets the real value and the stored plan keeps the command as written (its sha256 is what
an approval names); every copy made for a reader goes through `mask_argv`, `mask_text` or
`mask_document`, one rule for all (docs/configuration.md#secret-bearing-arguments-are-masked).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

MASK = "<SECRET:argument>"
# A URL's user:password (`postgres://u:pw@db/app`), as the redaction's URL-credentials rule replaces it.
_URL_CREDENTIALS = re.compile(r"""(?<=://)[^/\s:@'"<>]+:[^@\s/'"<>]+(?=@)""")
_PLACEHOLDER = re.compile(r"^<[A-Z]+:\w+>$")  # already a redaction placeholder (`<SECRET:private_key>`)
_WORDS = frozenset({"token", "secret", "password", "passwd", "credential", "credentials", "apikey", "passphrase"})
_KEYS = frozenset({("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("auth", "key")})
# A flag and its value inside text: `--name value`, `--name=value`, a list's items (`'--name', 'value'`, JSON
# over lines, a YAML flow list `[--name, value]`) and a YAML block list (`- --name` then `- value`).
_IN_TEXT = re.compile(r"""(?<![\w.-])(?P<flag>--?[A-Za-z][\w-]*)"""
                      r"""(?P<sep>=|[ \t]+|['"]?[ \t]*,\s*['"]?|[ \t]*\n[ \t]*-[ \t]+['"]?)"""
                      r"""(?P<value>[^\s'",\]\)]+)""")
# A quoted key and its quoted value (JSON, a Python dict's repr: vLLM logs its non-default args so).
_QUOTED_KEY = re.compile(r"""(?P<key>(?P<q>['"])[\w.-]+(?P=q)[ \t]*:[ \t]*)(?P<vq>['"])(?P<value>[^'"\n]*)(?P=vq)""")


def is_secret_flag(name: str) -> bool:
    """Whether an option or key name names a credential (`--hf-token`, `api_key`), by its words."""
    # The last word names what the value is: `--token-budget` is a number and `--token-file` a path.
    words = [w for w in re.split(r"[-_.\s]+", name.lower().lstrip("-")) if w]
    return bool(words) and (words[-1] in _WORDS or tuple(words[-2:]) in _KEYS)


def _detected(text: str) -> str:
    """`text` with what the secret detectors find replaced by its `<SECRET:kind>` placeholder."""
    if not text:
        return text
    from services.shared.text.detectors import KIND_CATEGORY, PLACEHOLDER_RE, SECRET, find, view_of

    view = view_of(text)
    spans = sorted(
        (f.start, f.end, f.kind) for f in find(view) if KIND_CATEGORY.get(f.kind) == SECRET and f.end > f.start
    )
    protected = [m.span() for m in PLACEHOLDER_RE.finditer(view)] if "<" in view else []
    parts, pos = [], 0
    for start, end, kind in spans:
        if start < pos or any(start < pe and ps < end for ps, pe in protected):
            continue
        parts += [text[pos:start], f"<SECRET:{kind}>"]
        pos = end
    return "".join([*parts, text[pos:]]) if parts else text


def mask_argv(argv: Sequence[str]) -> list[str]:
    """`argv` with every secret-bearing flag's value masked and every detected secret replaced."""
    out: list[str] = []
    mask_next = False
    for token in argv:
        token = str(token)
        if mask_next:
            mask_next = False
            if not token.startswith("--"):
                out.append(MASK)
                continue
        if token.startswith("-") and "=" in token and is_secret_flag(token.split("=", 1)[0]):
            out.append(f"{token.split('=', 1)[0]}={MASK}")
            continue
        if token.startswith("-") and is_secret_flag(token):
            mask_next = True
            out.append(token)
            continue
        # One word (a URL, a key, `password=...`): the detectors' findings. Prose (a sentence, a JSON
        # config) is left to the flag rules: the keyword grammar reads `forward pass` as a password.
        out.append(token if any(c.isspace() for c in token) else _detected(token))
    return out


def mask_text(text: str) -> str:
    """Free text (a shell-joined command, a job script, an error message) masked like an argv."""
    def flag(match: re.Match[str]) -> str:
        value = match.group("value")
        if not is_secret_flag(match.group("flag")) or value == MASK or value.startswith("--"):
            return match.group(0)
        return f"{match.group('flag')}{match.group('sep')}{MASK}"

    def quoted(match: re.Match[str]) -> str:
        value = match.group("value")
        if not is_secret_flag(match.group("key").split(match.group("q"))[1]) or not value or _PLACEHOLDER.match(value):
            return match.group(0)
        return f"{match.group('key')}{match.group('vq')}{MASK}{match.group('vq')}"

    masked = _QUOTED_KEY.sub(quoted, _IN_TEXT.sub(flag, text))
    return _URL_CREDENTIALS.sub("<SECRET:url_credentials>", masked) if "://" in masked else masked


def mask_document(value: Any) -> Any:
    """A JSON-like value with every argv, text and secret-named key's value masked (a copy)."""
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, dict):
        return {key: MASK if isinstance(key, str) and is_secret_flag(key) and isinstance(val, str) and val
                and not _PLACEHOLDER.match(val) else mask_document(val) for key, val in value.items()}
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(item, str) for item in value):
            return [mask_text(item) if " " in item else item for item in mask_argv(value)]
        return [mask_document(item) for item in value]
    return value
