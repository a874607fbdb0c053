"""The layering rule's two checks that import-linter does not make (docs/architecture.md).

1. No import cycles among the modules of `contracts` and `services`, counting
   every import statement: module level, inside functions, and under
   `TYPE_CHECKING` (grimp, import-linter's own graph builder, reads them all).
2. No bundle path literal outside `contracts/layout.py`: a step names what it
   reads and writes through the layout module, so a reader of the bundle finds
   every path in one place. Docstrings and `description=`/`help=` texts may
   mention paths; code may not spell them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("contracts", "services")
LAYOUT = ROOT / "contracts" / "layout.py"

# A string that starts like a path into a run's bundle: a step's folder then a
# name, or one of the files `specdec submit` and the store keep at the top.
_STEP_DIRS = ("profile", "corpus", "capacity", "training", "bench", "gate", "report", "operator")
PATH_LITERAL = re.compile(
    rf"^(?:(?:{'|'.join(_STEP_DIRS)})/(?:[\w.{{}}*-]|$)"
    r"|(?:campaign\.json|campaign\.yaml|inert\.json|events\.jsonl|manifest\.json)$)"
)
# Keyword arguments whose strings are prose for a person, not paths the code uses.
PROSE_KEYWORDS = frozenset({"description", "help", "title", "epilog"})


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return components


def test_tarjan_finds_a_cycle_and_nothing_else() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False, cache_dir=None)
    # A package's __init__ importing its own submodules is not a cycle of the
    # code; edges from a package to its children are dropped for that reason.
    edges = {
        module: {
            imported for imported in graph.find_modules_directly_imported_by(module)
            if not imported.startswith(module + ".")
        }
        for module in graph.modules
    }
    cycles = strongly_connected(edges)
    assert cycles == [], "import cycles (break each: a shared type in a module of its own, or invert a call):\n" + \
        "\n".join(" <-> ".join(cycle) for cycle in cycles)


def _prose_nodes(tree: ast.AST) -> set[int]:
    """ids of string nodes that are docstrings or prose keyword arguments."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        if isinstance(node, ast.keyword) and node.arg in PROSE_KEYWORDS:
            skip.update(id(sub) for sub in ast.walk(node.value))
    return skip


def path_literals(source: str) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    prose = _prose_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            head = node.values[0] if node.values else None
            if isinstance(head, ast.Constant) and isinstance(head.value, str) and PATH_LITERAL.match(head.value):
                if id(node) not in prose:
                    found.append((node.lineno, head.value))
            prose.update(id(value) for value in node.values)  # parts are judged with their f-string
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            if PATH_LITERAL.match(node.value):
                found.append((node.lineno, node.value))
    return sorted(found)


def test_path_literal_rule_sees_literals_and_fstrings_but_not_prose() -> None:
    source = '''
"""Module docstring naming gate/DECISION.json."""
A = "gate/DECISION.json"
B = f"bench/{cell}/trial-{n}"
C = Field(description="corpus/CORPUS.jsonl in the bundle")
D = "campaign.json"
E = "a benchmark/of sorts"
'''
    assert path_literals(source) == [(3, "gate/DECISION.json"), (4, "bench/"), (6, "campaign.json")]


def test_no_bundle_path_literal_outside_the_layout_module() -> None:
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == LAYOUT:
                continue
            for line, text in path_literals(path.read_text()):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert offenders == [], "bundle paths spelled outside contracts/layout.py (use its names):\n" + "\n".join(offenders)
