"""Redaction of secrets and personal data into typed placeholders: `redact(text) -> (text, counts)`.

Every string the corpus step writes passes through it, and so do the profiler's rejected-line
examples and the shared text errors. Pure, deterministic and idempotent; `detectors` finds, this
module merges and replaces (docs/corpus.md#redaction).
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from services.shared.text.detectors import KIND_CATEGORY, PLACEHOLDER_RE, PRIORITY, Finding, find, view_of

RULESET_VERSION = 2
# Placeholders per kind; the manifest reports counts under these kind names.
PLACEHOLDERS: dict[str, str] = {kind: f"<{category}:{kind}>" for kind, category in KIND_CATEGORY.items()}
KINDS: tuple[str, ...] = tuple(PLACEHOLDERS)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:  # pragma: no cover - they are dependencies
        return "missing"


def ruleset() -> str:
    """The redaction's identity for the evidence: rule version and detector versions."""
    libs = ", ".join(f"{d} {_version(d)}" for d in ("detect-secrets", "phonenumbers", "python-stdnum"))
    return f"specdec redact v{RULESET_VERSION} ({libs})"


def _merge(findings: list[Finding], protected: list[tuple[int, int]]) -> list[Finding]:
    """Sorted, non-overlapping spans: overlapping findings become their union under
    the highest-priority kind; findings touching an existing placeholder are dropped."""
    spans = sorted(f for f in findings if f.end > f.start)
    if protected:
        spans = [f for f in spans if not any(f.start < pe and ps < f.end for ps, pe in protected)]
    merged: list[Finding] = []
    for f in spans:
        if merged and f.start < merged[-1].end:
            last = merged[-1]
            kind = last.kind if PRIORITY[last.kind] <= PRIORITY[f.kind] else f.kind
            merged[-1] = Finding(last.start, max(last.end, f.end), kind)
        else:
            merged.append(f)
    return merged


def redact(text: str) -> tuple[str, dict[str, int]]:
    """Return `text` with every detected secret or personal datum replaced by
    its typed placeholder, and the count of replacements per kind (kinds with
    no replacement are absent). Idempotent: redact(redact(t)[0]) finds nothing."""
    counts: dict[str, int] = {}
    if not text:
        return text, counts
    view = view_of(text)
    findings = find(view)
    if not findings:
        return text, counts
    protected = [m.span() for m in PLACEHOLDER_RE.finditer(view)] if "<" in view else []
    parts: list[str] = []
    pos = 0
    for f in _merge(findings, protected):
        parts.append(text[pos : f.start])
        parts.append(PLACEHOLDERS[f.kind])
        counts[f.kind] = counts.get(f.kind, 0) + 1
        pos = f.end
    if not parts:
        return text, counts
    parts.append(text[pos:])
    return "".join(parts), counts


def cut(text: str, limit: int) -> str:
    """`text[:limit]`, moved back so that no placeholder is cut in half."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    lt = head.rfind("<")
    if lt >= 0 and ">" not in head[lt:]:
        m = PLACEHOLDER_RE.match(text, lt)
        if m is not None:
            return text[:lt]
    return head


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
