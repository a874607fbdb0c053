"""Which interpreter serves a suffix cell, and the arctic-inference version this process knows of.

The bench-runner asks that interpreter before the cell's first launch (services/bench/executors/preflight.py);
checking a campaign never runs it: it is a program the campaign names (docs/bench-runner.md#suffix-decoding).
`version_here` reads this process's installed distributions: no import, no process.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import sys
from collections.abc import Sequence

DISTRIBUTION = "arctic-inference"


def serving_python(argv: Sequence[str] | None, *, console_works: bool) -> str | None:
    """The interpreter that runs a server of this argv (None: the builtin command); None when the program
    does not say (a wrapper). `console_works`: whether the `vllm` console script runs here."""
    if not argv:
        return sys.executable
    program = argv[0]
    if program == "vllm":
        if not console_works:
            return sys.executable  # run through vLLM's entry points by this interpreter
        return _shebang(shutil.which("vllm"))
    name = os.path.basename(program)
    if name.startswith("python"):
        return shutil.which(program) or (program if os.path.isfile(program) else None)
    return None


def _shebang(script: str | None) -> str | None:
    if script is None:
        return None
    try:
        with open(script, "rb") as fh:
            first = fh.readline(4096).decode("utf-8", errors="replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if words and os.path.basename(words[0]) == "env" and len(words) > 1:
        return shutil.which(words[1])
    return words[0] if words else None


def version_here(python: str) -> str | None:
    """`arctic-inference==X` when `python` is this process's own interpreter and has the package installed;
    None otherwise (another interpreter is never run to find out)."""
    if os.path.abspath(python) != os.path.abspath(sys.executable):
        return None
    try:
        return f"{DISTRIBUTION}=={importlib.metadata.version(DISTRIBUTION)}"
    except importlib.metadata.PackageNotFoundError:
        return None
