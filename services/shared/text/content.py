"""Content class of one request: one label per record, so the profile's fractions sum to 1.

The rules are checked in order and the first that matches wins, the most specific evidence first
(docs/profiler.md#content-mix); only the first TEXT_CAP_CHARS of prompt and completion are read, to
bound a pathological line's cost.
"""

from __future__ import annotations

import re

import orjson

from services.shared.text.forms import TrafficRecord

CONTENT_CLASSES: tuple[str, ...] = ("code", "structured", "math", "chat", "multilingual", "agentic", "rag")
CLASS_CODE = {name: code for code, name in enumerate(CONTENT_CLASSES)}

TEXT_CAP_CHARS = 8000
RAG_MIN_INPUT_TOKENS = 4096
RAG_MARKED_MIN_INPUT_TOKENS = 1024
CODE_MIN_LINES = 3
MATH_MIN_EXPRESSIONS = 3
MULTILINGUAL_MIN_SHARE = 0.2
ACCENTED_MIN_SHARE = 0.02

# Patterns anchored on a literal "\n" (the text is given a leading one) let the
# regex engine jump from newline to newline instead of trying every position, and
# each costlier pattern runs only when a plain substring test says it can match:
# classification runs on every sampled record of a file of any size.
_RAG_MARKERS = re.compile(
    r"\n[ \t]*(?:context|documents?|sources?|passages?|retrieved(?: documents| passages)?|references?)[ \t]*:",
    re.IGNORECASE,
)
_RAG_TAG = re.compile(r"<(?:document|context|source|passage)\b", re.IGNORECASE)
_STRUCTURED_FENCE = re.compile(r"```[ \t]*(?:json|jsonl|yaml|yml|xml|csv)\b", re.IGNORECASE)
_CODE_KEYWORD_LINE = re.compile(
    r"\n[ \t]*(?:def |class |import |from \S+ import |#include|function |func |fn |let |const |var |"
    r"public |private |package |return\b|if \(|for \(|while \(|SELECT |INSERT |CREATE TABLE|#!/)"
)
_CODE_END_LINE = re.compile(r"[;{}][ \t]*(?=\n|\Z)")
_LATEX = re.compile(r"\\(?:frac|sum|int|sqrt|cdot|times|begin\{(?:equation|align)|left|right)\b|\$\$|\\\(|\\\[")
# An operator between a number and a number/variable; '-' and '/' need spaces around
# them so that dates (2024-05-01, 05/01/2024) and phone numbers are not sums.
_EXPRESSION = re.compile(r"\d(?:\.\d+)?[a-z]?(?:[ \t]*[+*^=×÷][ \t]*|[ \t]+[-/][ \t]+)\(?[ \t]*(?:\d|[a-z]\b)")
_OPERATORS = ("+", "*", "^", "=", "×", "÷", " - ", " / ")
_LETTER = re.compile(r"[^\W\d_]")
_ACCENTED = re.compile(r"[\u00c0-\u024f]")


def classify(record: TrafficRecord, input_tokens: int | None) -> str:
    """The content class of one record (the rules: docs/profiler.md#content-mix)."""
    if record.uses_tools:
        return "agentic"
    prompt = "\n" + record.prompt_text[:TEXT_CAP_CHARS]
    completion = (record.completion_text or "")[:TEXT_CAP_CHARS]
    if input_tokens is not None:
        if input_tokens >= RAG_MIN_INPUT_TOKENS:
            return "rag"
        if input_tokens >= RAG_MARKED_MIN_INPUT_TOKENS and _has_rag_markers(prompt):
            return "rag"
    answer = completion or prompt
    if record.wants_json or _is_json(completion) or ("```" in answer and _STRUCTURED_FENCE.search(answer)):
        return "structured"
    text = prompt + "\n" + completion
    if "```" in text or _code_lines(text) >= CODE_MIN_LINES:
        return "code"
    if _is_math(text):
        return "math"
    if _is_multilingual(text):
        return "multilingual"
    return "chat"


def _has_rag_markers(prompt: str) -> bool:
    return bool(_RAG_MARKERS.search(prompt) or ("<" in prompt and _RAG_TAG.search(prompt)))


def _code_lines(text: str) -> int:
    lines = len(_CODE_KEYWORD_LINE.findall(text))
    if ";" in text or "{" in text or "}" in text:
        lines += len(_CODE_END_LINE.findall(text))
    return lines


def _is_math(text: str) -> bool:
    if ("\\" in text or "$$" in text) and _LATEX.search(text):
        return True
    return any(op in text for op in _OPERATORS) and len(_EXPRESSION.findall(text)) >= MATH_MIN_EXPRESSIONS


def _count(pattern: re.Pattern[str], text: str) -> int:
    return len(pattern.findall(text))


def _is_json(text: str) -> bool:
    stripped = text.strip()
    if len(stripped) < 2 or stripped[0] not in "{[" or stripped[-1] not in "}]":
        return False
    try:
        orjson.loads(stripped)
    except orjson.JSONDecodeError:
        return False
    return True


def _is_multilingual(text: str) -> bool:
    if text.isascii():
        return False
    letters = _LETTER.findall(text)
    if not letters:
        return False
    non_latin = sum(1 for ch in letters if ch > "\u024f")
    if non_latin / len(letters) >= MULTILINGUAL_MIN_SHARE:
        return True
    accented = len(_ACCENTED.findall(text))
    return accented >= 5 and accented / len(letters) >= ACCENTED_MIN_SHARE
