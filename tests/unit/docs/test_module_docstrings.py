"""A module docstring says in a few lines what the module is for and why; the rest lives in docs/.
Eight lines is the bound: enough for a role, an invariant and a pointer to the doc that explains."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MAX_LINES = 8


def long_docstrings(root: Path, top: str = "services") -> list[str]:
    found = []
    for path in sorted((root / top).rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text()), clean=True)
        if doc and len(doc.splitlines()) > MAX_LINES:
            found.append(f"{path.relative_to(root)}: {len(doc.splitlines())} lines")
    return found


def test_every_service_module_docstring_is_a_few_lines() -> None:
    found = long_docstrings(ROOT)
    assert not found, f"module docstrings over {MAX_LINES} lines (move the rest to docs/): {found}"


def test_a_planted_long_docstring_is_found(tmp_path: Path) -> None:
    package = tmp_path / "services"
    package.mkdir()
    (package / "short.py").write_text('"""What it is for."""\n')
    (package / "long.py").write_text('"""' + "\n".join(["a line"] * (MAX_LINES + 1)) + '"""\n')
    assert long_docstrings(tmp_path) == [f"{Path('services', 'long.py')}: {MAX_LINES + 1} lines"]
