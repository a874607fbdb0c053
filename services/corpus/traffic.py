"""Reading the traffic file for the corpus: a scan pass and fetch passes.

The scan keeps a handful of numbers per usable record, so memory grows with records, not bytes; a fetch
returns only the wanted lines, redacted: unredacted text never leaves one line's parsing. Lines are
parsed, counted and classified by the profiler's own code, so a record's numbers and class are the ones
its line gave the profile (docs/corpus.md#memory-and-passes)."""

from __future__ import annotations

import hashlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from services.corpus.dedup import exact_key
from services.corpus.errors import TrafficUnusable
from services.shared.text.content import CLASS_CODE, classify
from services.shared.text.forms import NOT_JSON, LineError, TrafficRecord, parse_object
from services.shared.text.lines import read_lines
from services.shared.text.redact import merge_counts, redact
from services.shared.text.tokens import TokenizerCounter, estimate_tokens

MAX_REJECTED_EXAMPLES = 10
_UTF8_BOM = b"\xef\xbb\xbf"
COUNT_SOURCES = ("from_fields", "from_tokenizer", "estimated", "missing")
SKIP_REASONS = ("no_text", "no_output_tokens", "too_long")


def prompt_text(messages: list[dict[str, str]]) -> str:
    """The text duplicates are judged on: every prompt turn with its role."""
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages)


@dataclass
class Scan:
    """Per-record numbers of the usable records, in file order, and the accounting."""

    line: array = field(default_factory=lambda: array("q"))
    key: array = field(default_factory=lambda: array("Q"))
    cls: array = field(default_factory=lambda: array("q"))
    input_tokens: array = field(default_factory=lambda: array("q"))
    output_tokens: array = field(default_factory=lambda: array("q"))
    lines: int = 0
    blank_lines: int = 0
    accepted: int = 0
    rejected: int = 0
    rejected_by_kind: dict[str, int] = field(default_factory=dict)
    rejected_examples: list[dict[str, Any]] = field(default_factory=list)
    diagnostics_redactions: dict[str, int] = field(default_factory=dict)
    input_sources: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_SOURCES, 0))
    output_sources: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_SOURCES, 0))
    skipped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SKIP_REASONS, 0))
    sha256: str = ""

    def column(self, name: str) -> np.ndarray:
        values = getattr(self, name)
        return np.frombuffer(values, dtype=np.uint64 if values.typecode == "Q" else np.int64)


def _lines(path: Path, hasher: Any | None = None):
    """(1-based line number, bytes) of every line; feeds `hasher` every byte."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise TrafficUnusable(
            f"cannot read traffic file {path}: {exc.strerror}; pass --traffic an existing JSONL file"
        ) from exc
    with handle:
        # Bounded: a line over the limit refuses the file before it is held (services/shared/text/lines.py).
        for number, raw in enumerate(read_lines(handle, path), start=1):
            if hasher is not None:
                hasher.update(raw)
            # A UTF-8 byte-order mark opens some exported files; the profiler skips it too.
            yield number, (raw[3:] if number == 1 and raw.startswith(_UTF8_BOM) else raw)


def _parse(raw: bytes) -> TrafficRecord:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise LineError(NOT_JSON, "the line is not valid JSON (or not UTF-8)") from None
    return parse_object(obj)


def count_tokens(
    given: int | None, text: str | None, tokenizer: TokenizerCounter | None, sources: dict[str, int]
) -> int | None:
    """The profiler's precedence: the line's count, else the tokenizer, else its
    estimate; None when there is neither a count nor text. Tallies the source."""
    if given is not None:
        sources["from_fields"] += 1
        return given
    if text is None:
        sources["missing"] += 1
        return None
    if tokenizer is not None:
        sources["from_tokenizer"] += 1
        return tokenizer.count(text)
    sources["estimated"] += 1
    return estimate_tokens(text)


def scan(path: Path, tokenizer: TokenizerCounter | None, max_model_len: int | None) -> Scan:
    """One streaming pass: accounting, sha256 and the numbers of usable records."""
    out = Scan()
    hasher = hashlib.sha256()
    for number, raw in _lines(path, hasher):
        out.lines += 1
        if not raw.strip():
            out.blank_lines += 1
            continue
        try:
            record = _parse(raw)
        except LineError as exc:
            out.rejected += 1
            out.rejected_by_kind[exc.kind] = out.rejected_by_kind.get(exc.kind, 0) + 1
            if len(out.rejected_examples) < MAX_REJECTED_EXAMPLES:
                reason, counts = redact(exc.reason)
                merge_counts(out.diagnostics_redactions, counts)
                out.rejected_examples.append({"line": number, "kind": exc.kind, "reason": reason})
            continue
        out.accepted += 1
        n_in = count_tokens(record.input_tokens, record.prompt_text, tokenizer, out.input_sources)
        n_out = count_tokens(record.output_tokens, record.completion_text, tokenizer, out.output_sources)
        # n_in is None only without prompt text, which is skipped here too.
        if n_in is None or not record.prompt_text.strip():
            out.skipped["no_text"] += 1
            continue
        if n_out is None:
            out.skipped["no_output_tokens"] += 1
            continue
        if max_model_len is not None and n_in + n_out > max_model_len:
            out.skipped["too_long"] += 1
            continue
        out.line.append(number)
        # Keyed on the unredacted text only to order and dedup in memory; the
        # key is never written (record ids come from the redacted text).
        out.key.append(exact_key(prompt_text(record.messages)))
        out.cls.append(CLASS_CODE[classify(record, n_in)])
        out.input_tokens.append(n_in)
        out.output_tokens.append(n_out)
    out.sha256 = hasher.hexdigest()
    return out


@dataclass
class Fetched:
    """One wanted line, redacted."""

    messages: list[dict[str, str]]
    completion: str | None
    redactions: dict[str, int]


def fetch(path: Path, wanted: set[int]) -> dict[int, Fetched]:
    """The wanted lines (1-based numbers from `scan`), parsed and redacted."""
    found: dict[int, Fetched] = {}
    if not wanted:
        return found
    last = max(wanted)
    for number, raw in _lines(path):
        if number > last:
            break
        if number not in wanted:
            continue
        try:
            record = _parse(raw)
        except LineError as exc:  # the file changed between passes
            raise TrafficUnusable(
                f"traffic line {number} parsed in the first pass but not now ({exc.kind}); "
                "the file changed while the corpus was built: run again on a file nothing writes to"
            ) from None
        counts: dict[str, int] = {}
        messages = []
        for m in record.messages:
            content, c = redact(m["content"])
            merge_counts(counts, c)
            messages.append({"role": m["role"], "content": content})
        completion = None
        if record.completion_text is not None:
            completion, c = redact(record.completion_text)
            merge_counts(counts, c)
        found[number] = Fetched(messages, completion, counts)
    missing = wanted - found.keys()
    if missing:
        raise TrafficUnusable(
            f"{len(missing)} traffic line(s) seen in the first pass are gone (first: {min(missing)}); "
            "the file changed while the corpus was built: run again on a file nothing writes to"
        )
    return found
