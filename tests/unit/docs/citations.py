"""Citations of repository paths and anchors in .py and .md files, and the ones that do not resolve.

What counts as a citation (the kinds below; `check` reports each one that does not resolve):

- **path**: a token starting with a top-level folder of the repository (`contracts/`, `docs/`,
  `infra/`, `services/`, `tests/`) or naming a top-level file (`README.md`, `Makefile`,
  `compose.yaml`, `pyproject.toml`, `.importlinter`), read from the repository root, not
  preceded by a word character, `.`, `/`, `-`, `$` or `~` (so `/abs/docs/x` and `bundles/<run>/...`
  are not citations). It may end in
  - `#anchor`: the file is Markdown and has a heading whose GitHub anchor is `anchor`
    (docs/design.md#principle-1-no-inert-configuration);
  - `::name` (repeated): a pytest node; each name is a `def` or `class` in the Python file
    (tests/unit/runtime/delivery/test_wire.py::...; parametrize ids are not part of the token);
  - `.symbol` where the token itself does not exist: a module and a name in it
    (services/shared/campaign_checks.static_problems: the module's file defines `static_problems`).
  A token directly followed by `*`, `<`, `{` or `$` is a pattern or a template
  (tests/perf/bench_*.py, a folder named per version), not one path: it is skipped.
- **section by name**: a cited Markdown file (a path, a Markdown link, or a bare name below)
  followed by an optional `)`, then a comma or whitespace, then a double-quoted title, as in
  docs/delivery.md, "Groups come back": the file has a heading or a bold paragraph lead
  (`**Title...**`) that starts with that title (case and whitespace aside; backticks dropped).
- **Markdown link** (in .md files, outside fenced code, as bare names are): `[text](target)` whose target has no
  URL scheme; the target resolves from the linking file's folder, `#anchor` as above, and a
  bare `(#anchor)` names a heading of the same file.
- **bare Markdown name**: an all-capitals `NAME.md` anywhere outside quotes and backticks, or any
  `name.md` right after `(` and before `)` or `,` (the project's "(file, section)" style);
  found in the citing file's folder, in docs/, or at the root.

Skipped: folders that are not the project's own (virtual environments, `.run`, `node_modules`,
caches, build outputs, bundles, models), this module (SKIP_FILES: its table below names missing
paths on purpose) and EXCLUDED, each entry with its reason.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT_DIRS = ("contracts", "docs", "infra", "services", "tests")
ROOT_FILES = ("README.md", "Makefile", "compose.yaml", "pyproject.toml", ".importlinter")

# Folders whose files are not the project's own text: environments, caches, run outputs.
SKIP_DIR_NAMES = frozenset({
    ".git", ".run", "node_modules", "__pycache__", ".pytest_cache", ".import_linter_cache", ".cache",
    "bundles", "build", "models", "perf-results", ".whl", ".gl",
})
SKIP_DIR_PREFIXES = (".venv",)  # .venv, .venv-speculators
SKIP_DIR_SUFFIXES = (".egg-info",)

# This module: its EXCLUDED table names, on purpose, paths that do not exist.
SKIP_FILES = frozenset({"tests/unit/docs/citations.py"})

# (citing file, cited token) -> why the token is not a path that must exist.
EXCLUDED: dict[tuple[str, str], str] = {
    ("tests/unit/contracts/campaign/test_validation.py", "infra/k8s/template.yaml"):
        "a campaign value the model must refuse before any file is read; the file need not exist",
    ("docs/deployment.md", "infra/docker/pip-files/local/wheels/"):
        "the build instructions create it (`mkdir -p`) and fill it with the operator's own wheel",
    ("docs/deployment.md", "infra/docker/pip-files/local/wheels"):
        "the build instructions create it (`mkdir -p`) and fill it with the operator's own wheel",
    ("docs/deployment.md", "infra/docker/pip-files/local"):
        "the folder the build instructions create above, passed to `docker build`",
}

_ROOTS = "|".join(ROOT_DIRS)
_FILES = "|".join(re.escape(f) for f in ROOT_FILES)
PATH_RE = re.compile(
    rf"(?<![\w./$~-])((?:{_ROOTS})/[\w.\-/]*|(?:{_FILES})(?![\w.-]))"
    r"((?:#[\w-]+)|(?:::\w+)+)?"
)
SECTION_RE = re.compile(r"(?:\)?,\s*|\)?\s+)\"([\w`][^\"\n]*(?:\n[^\"\n]+)?)\"")
LINK_RE = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
BARE_RE = re.compile(r"(?<![\w./`'\"-])([A-Z][A-Z0-9_-]*\.md)(?![\w`\"-])|(?<=\()([\w-]+\.md)(?=[),])")
HEADING_RE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
FENCE_RE = re.compile(r"^ {0,3}(```|~~~)")
BOLD_LEAD_RE = re.compile(r"^\s*(?:[-*]\s+|\d+\.\s+|\|\s*)?\*\*([^*]+)")
SCHEME_RE = re.compile(r"^[a-zA-Z][\w+.-]*:")


@dataclass(frozen=True)
class Problem:
    file: str  # relative to the root
    line: int
    citation: str
    why: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.citation!r}: {self.why}"


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading (before de-duplication)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link reads as its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _unfenced_lines(text: str) -> list[tuple[int, str]]:
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE_RE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def _fenced_lines(text: str) -> set[int]:
    unfenced = {number for number, _ in _unfenced_lines(text)}
    return set(range(1, text.count("\n") + 2)) - unfenced


@dataclass(frozen=True)
class Outline:
    anchors: frozenset[str]
    titles: tuple[str, ...]  # headings and bold leads, normalized for a by-name section match


def _norm(title: str) -> str:
    return " ".join(title.replace("`", "").split()).casefold()


@cache
def outline(path: Path) -> Outline:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    titles: list[str] = []
    for _, line in _unfenced_lines(path.read_text(encoding="utf-8")):
        if m := HEADING_RE.match(line):
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            anchors.add(base if n == 0 else f"{base}-{n}")
            titles.append(_norm(m.group(2)))
        elif m := BOLD_LEAD_RE.match(line):
            titles.append(_norm(m.group(1)))
    return Outline(frozenset(anchors), tuple(titles))


@cache
def defined_names(path: Path) -> frozenset[str]:
    text = path.read_text(encoding="utf-8")
    names = set(re.findall(r"^\s*(?:async\s+def|def|class)\s+(\w+)", text, re.M))
    names |= set(re.findall(r"^\s*(\w+)\s*(?::[^=\n]*)?=(?!=)", text, re.M))
    return frozenset(names)


def project_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(
            d for d in dirs
            if d not in SKIP_DIR_NAMES and not d.startswith(SKIP_DIR_PREFIXES) and not d.endswith(SKIP_DIR_SUFFIXES)
        )
        found += [
            Path(folder, f) for f in sorted(files)
            if f.endswith((".py", ".md")) and Path(folder, f).relative_to(root).as_posix() not in SKIP_FILES
        ]
    return found


class _Checker:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.problems: list[Problem] = []

    def report(self, file: Path, text: str, at: int, citation: str, *, why: str) -> None:
        line = text.count("\n", 0, at) + 1
        self.problems.append(Problem(file.relative_to(self.root).as_posix(), line, citation, why))

    def inside(self, target: Path) -> bool:
        return target == self.root or self.root in target.parents

    def check_file(self, file: Path) -> None:
        text = file.read_text(encoding="utf-8")
        rel = file.relative_to(self.root).as_posix()
        for m in PATH_RE.finditer(text):
            self.check_path(file, rel, text, m)
        fenced = _fenced_lines(text) if file.suffix == ".md" else set()
        for m in BARE_RE.finditer(text):
            if text.count("\n", 0, m.start()) + 1 not in fenced:
                self.check_bare(file, text, m)
        if file.suffix == ".md":
            self.check_links(file, text)

    def check_path(self, file: Path, rel: str, text: str, m: re.Match[str]) -> None:
        token, suffix = m.group(1), m.group(2) or ""
        if not suffix and text[m.end():m.end() + 1] in ("*", "<", "{", "$"):
            return  # a pattern or a template, not one path
        if not suffix:
            token = token.rstrip(".-,")
        if (rel, token) in EXCLUDED:
            return
        citation = token + suffix
        target = self.root / token
        if not target.exists():
            module, _, symbol = token.rpartition(".")
            for candidate in (self.root / f"{module}.py", self.root / module / "__init__.py"):
                if module and symbol.isidentifier() and candidate.is_file():
                    if symbol not in defined_names(candidate):
                        self.report(
                            file,
                            text,
                            m.start(),
                            citation,
                            why=f"{candidate.relative_to(self.root)} defines no {symbol}",
                        )
                    return
            self.report(file, text, m.start(), citation, why="no such file or folder")
            return
        if suffix.startswith("#"):
            self.check_anchor(file, text, m.start(), citation, target=target, anchor=suffix[1:])
        elif suffix.startswith("::"):
            if target.suffix != ".py" or not target.is_file():
                self.report(file, text, m.start(), citation, why="a test node names a Python file")
                return
            for name in suffix[2:].split("::"):
                if name not in defined_names(target):
                    self.report(file, text, m.start(), citation, why=f"{token} defines no {name}")
        self.check_section(file, text, m.end(), citation, target=target)

    def check_anchor(self, file: Path, text: str, at: int, citation: str, *, target: Path, anchor: str) -> None:
        if target.suffix != ".md" or not target.is_file():
            self.report(file, text, at, citation, why="an anchor names a Markdown file")
        elif anchor not in outline(target).anchors:
            self.report(file, text, at, citation, why=f"no heading with anchor #{anchor}")

    def check_section(self, file: Path, text: str, end: int, citation: str, *, target: Path) -> None:
        if target.suffix != ".md" or not target.is_file():
            return
        m = SECTION_RE.match(text, end)
        if m is None:
            return
        title = _norm(m.group(1).replace("#", " "))
        if not any(t.startswith(title) for t in outline(target).titles):
            self.report(
                file, text, end, f'{citation}, "{m.group(1)}"', why="no heading or bold lead starts with that title"
            )

    def check_bare(self, file: Path, text: str, m: re.Match[str]) -> None:
        name = m.group(1) or m.group(2)
        if name in ROOT_FILES:
            return  # a path citation already
        for folder in (file.parent, self.root / "docs", self.root):
            if (folder / name).is_file():
                self.check_section(file, text, m.end(), name, target=folder / name)
                return
        self.report(
            file, text, m.start(), name, why="no such Markdown file beside the citing file, in docs/ or at the root"
        )

    def check_links(self, file: Path, text: str) -> None:
        offsets = [0]
        for line in text.splitlines(keepends=True):
            offsets.append(offsets[-1] + len(line))
        for number, line in _unfenced_lines(text):
            for m in LINK_RE.finditer(line):
                target_text = m.group(1)
                if SCHEME_RE.match(target_text):
                    continue
                path_part, _, anchor = target_text.partition("#")
                target = (file.parent / path_part).resolve() if path_part else file
                at = offsets[number - 1] + m.start()
                if not self.inside(target) or not target.exists():
                    self.report(file, text, at, target_text, why="the link's target does not exist")
                    continue
                if anchor:
                    self.check_anchor(file, text, at, target_text, target=target, anchor=anchor)
                self.check_section(file, text, offsets[number - 1] + m.end(), target_text, target=target)


def check(root: Path) -> list[Problem]:
    """Every citation in the .py and .md files under `root` that does not resolve."""
    checker = _Checker(root)
    for file in project_files(checker.root):
        checker.check_file(file)
    return checker.problems
