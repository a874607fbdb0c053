"""The example scripts' imports form a tree (infra/examples/trainer_data.py's docstring draws it).

Read from the source (ast), imports inside functions included: a cycle dodged by importing
late is still a cycle. Nothing is imported or run here.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[3] / "infra" / "examples"
SCRIPTS = {path.stem: ast.parse(path.read_text(), str(path)) for path in sorted(EXAMPLES.glob("*.py"))}
TRAINERS = {"train_draft", "train_eagle3"}


def _siblings(tree: ast.Module) -> set[str]:
    """The examples a script imports, anywhere in it."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names & SCRIPTS.keys()


GRAPH = {name: _siblings(tree) for name, tree in SCRIPTS.items()}


def test_the_examples_import_graph_has_no_cycle():
    assert TRAINERS <= GRAPH.keys() and "trainer_data" in GRAPH  # the scan saw the scripts it is about
    try:
        order = list(TopologicalSorter(GRAPH).static_order())
    except CycleError as exc:
        raise AssertionError(f"the examples import each other in a cycle: {exc.args[1]}") from None
    assert order.index("trainer_data") < min(order.index(t) for t in TRAINERS)


def test_the_shared_modules_are_leaves():
    assert GRAPH["offline_acceptance"] == set()  # the one definition imports no trainer (nor anything else here)
    assert GRAPH["trainer_data"] == set()
    assert "train_draft" not in GRAPH["train_eagle3"]  # the shared data is trainer_data's, not one trainer's


def test_no_example_edits_its_module_path():
    edits = [f"{name}.py:{node.lineno}" for name, tree in SCRIPTS.items() for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and node.attr == "path"
             and isinstance(node.value, ast.Name) and node.value.id == "sys"]
    assert edits == []  # Python puts a script's own folder first on its path; its sibling imports need no edit
