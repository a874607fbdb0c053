"""Every mypy ignore comment names the error it silences and says why the checker cannot see what the code knows.

On one line: the marker (MARK below), its codes in brackets, then the reason as a comment of its own, e.g.
`...[arg-type]  # a test stand-in for Delivered`. mypy's ignore-without-code checks the codes on the lines mypy
reads; this checks the reason as well. Only comments count: a docstring or string that spells the marker is no
ignore. This file spells the marker in pieces, so that a grep of the tree for it finds no bare one here.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FOLDERS = ("services", "contracts", "tests", "infra")

MARK = "type" + ": ignore"
_IGNORE = re.compile(r"type:\s*ignore\b(?P<rest>.*)")
# The bracketed codes, then the reason: a comment with something in it.
_EXPLAINED = re.compile(r"\[[\w, -]+\]\s+#\s*\S")


def unexplained(source: str) -> list[tuple[int, str]]:
    """(line, comment) of each ignore comment in `source` without a bracketed code and a reason after it."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        ignore = _IGNORE.search(token.string)
        if ignore is not None and not _EXPLAINED.match(ignore.group("rest")):
            found.append((token.start[0], token.string))
    return found


def test_the_scan_finds_an_ignore_without_its_code_or_its_reason() -> None:
    planted = "\n".join([
        f"bare = 1  # {MARK}",
        f"code_only = 2  # {MARK}[assignment]",
        f"explained = 3  # {MARK}[assignment]  # a test stand-in for the real type",
        f"two_codes = 4  # {MARK}[arg-type, attr-defined]  # the stand-in above",
        f"reason_only = 5  # {MARK}  # a reason, but which error?",
        f"empty_reason = 6  # {MARK}[misc]  #",
        f"after_a_note = 7  # a note first  # {MARK}[misc]",
        f'in_a_string = "# {MARK}"',
        "",
    ])
    assert [line for line, _ in unexplained(planted)] == [1, 2, 5, 6, 7]


def test_every_ignore_in_the_tree_names_its_code_and_its_reason() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}: {comment}"
             for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))
             for line, comment in unexplained(path.read_text())]
    assert found == [], f"each needs `{MARK}[code]  # why the checker cannot see it`:\n" + "\n".join(found)
