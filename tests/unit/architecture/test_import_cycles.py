"""No import cycle between modules of services/, contracts/ and tests/ (grimp's graph, as lint-imports reads it).

Imports inside functions count: a cycle dodged by importing late is still a cycle. Imports under
`if TYPE_CHECKING:` do not, as they never run. infra/examples' scripts are not packages:
tests/unit/examples/test_import_tree.py covers them.
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("services", "contracts", "tests")


def _namespace_portions(root: Path, package: str) -> list[str]:
    """The folders of a package without an __init__.py (tests/unit, ...): grimp walks them only when named."""
    return [f"{package}.{folder.name}" for folder in sorted((root / package).iterdir())
            if folder.is_dir() and not (folder / "__init__.py").exists() and any(folder.rglob("*.py"))]


def build(root: Path, packages: tuple[str, ...]) -> grimp.ImportGraph:
    names = [name for package in packages for name in (package, *_namespace_portions(root, package))]
    return grimp.build_graph(*names, exclude_type_checking_imports=True, cache_dir=None)


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every strongly connected set of modules larger than one (or a module importing itself), each sorted."""
    imports = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(imports):
        if start in order:
            continue
        # Tarjan's algorithm, iterative: a chain of imports may be deeper than the recursion limit.
        work = [(start, iter(sorted(imports[start])))]
        order[start] = low[start] = len(order)
        stack.append(start)
        while work:
            module, rest = work[-1]
            nxt = next(rest, None)
            if nxt is not None:
                if nxt not in order:
                    order[nxt] = low[nxt] = len(order)
                    stack.append(nxt)
                    work.append((nxt, iter(sorted(imports[nxt]))))
                elif nxt in stack:
                    low[module] = min(low[module], order[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == order[module]:
                part = []
                while True:
                    member = stack.pop()
                    part.append(member)
                    if member == module:
                        break
                if len(part) > 1 or module in imports[module]:
                    found.append(sorted(part))
    return found


def _described(graph: grimp.ImportGraph, cycle: list[str]) -> str:
    members = set(cycle)
    lines = []
    for importer in cycle:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                lines.append(f"  {importer}:{detail['line_number']} {detail['line_contents']}")
    return "\n".join(lines)


def test_the_tree_has_no_import_cycle() -> None:
    graph = build(ROOT, PACKAGES)
    # The scan saw every module: a folder it skipped would hide its cycles.
    files = {".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
             for package in PACKAGES for path in (ROOT / package).rglob("*.py")}
    assert files - graph.modules == set()
    found = cycles(graph)
    assert found == [], "modules that import each other in a cycle:\n" + "\n\n".join(
        _described(graph, cycle) for cycle in found)


def test_a_planted_cycle_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "planted_cycles"
    (package / "deep").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "deep" / "__init__.py").write_text("")
    (package / "first.py").write_text("from planted_cycles.deep import second\n")
    # The way back runs late, inside a function: still a cycle.
    (package / "deep" / "second.py").write_text("def late():\n    from planted_cycles import first\n")
    (package / "third.py").write_text("from planted_cycles import first\n")  # imports into the cycle, not part of it
    (package / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from planted_cycles import untyped\n")
    (package / "untyped.py").write_text("from planted_cycles import typed\n")  # closes only a TYPE_CHECKING loop
    (package / "loose").mkdir()  # a folder without __init__.py: walked because it is named
    (package / "loose" / "fourth.py").write_text("from planted_cycles.loose import fifth\n")
    (package / "loose" / "fifth.py").write_text("import planted_cycles.loose.fourth\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = build(tmp_path, ("planted_cycles",))
    assert cycles(graph) == [
        ["planted_cycles.deep.second", "planted_cycles.first"],
        ["planted_cycles.loose.fifth", "planted_cycles.loose.fourth"],
    ]
    assert "planted_cycles.first:1 from planted_cycles.deep import second" in _described(graph, cycles(graph)[0])
