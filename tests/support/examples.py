"""The example scripts of infra/examples/ as tests import them: as Python runs them.

Run as `python infra/examples/train_draft.py ...`, a script has its own folder first on its module
path, and its plain sibling imports (`from trainer_data import ...`) resolve there. Tests import
the scripts the same way, by their plain names with that folder on the path, so each example is
one module (one ExampleError class, one toy_target) however many tests and scripts import it.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[2] / "infra" / "examples"


def example(name: str) -> ModuleType:
    """infra/examples/<name>.py, imported by its plain name as its sibling scripts import it."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))  # where the interpreter puts a script's own folder
    module = importlib.import_module(name)
    assert module.__file__ is not None, f"{name} is not a module from a file"
    assert Path(module.__file__).resolve().parent == EXAMPLES, f"{name} resolved to {module.__file__}, not the example"
    return module
