"""Before a cell's first launch: can its serving interpreter import what the cell declares (suffix: arctic_inference)?

Asked once per cell, after approval and before any launch; a cell that cannot fails by name, and nothing
serves another method in its place. Only here, never when a campaign is checked: the interpreter is a
program the campaign names, and checking a campaign runs nothing it names (docs/bench-runner.md#suffix-decoding)."""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import dataclass

from services.bench.planning.model import BenchPlan
from services.runtime.processes import workload_env
from services.shared.suffix_package import DISTRIBUTION, serving_python
from services.shared.vllm_cli import vllm_console_works

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


_FOUND: dict[str, Probe] = {}


def probe(python: str) -> Probe:
    """Ask `python` to import the suffix proposer's package. A found package is remembered per interpreter; a
    missing one is asked again next time (a package installed after the runner started is then seen)."""
    if python in _FOUND:
        return _FOUND[python]
    found = _probe(python)
    if found.version:
        _FOUND[python] = found
    return found


def _probe(python: str) -> Probe:
    try:  # a workload's environment (the platform's), as a local server gets it: never the service's credentials
        out = subprocess.run(  # an approved plan's interpreter, a fixed script
            [python, "-c", _PROBE], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False,
            env=workload_env.environment(),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Probe(python=python, version=None, why=f"{python} could not be run ({exc})")
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return Probe(
            python=python, version=None, why=f"{python} cannot import arctic_inference.suffix_decoding ({last})"
        )
    lines = out.stdout.strip().splitlines()
    return Probe(python=python, version=lines[-1] if lines else "unknown")


def refusal(cell_id: str, found: Probe) -> str:
    """One line: why a suffix cell cannot be served, and what to do."""
    return (f"cell {cell_id} serves speculative method suffix, but {found.why}: vLLM's suffix proposer needs the "
            f"{DISTRIBUTION} package in the serving interpreter (make setup builds and installs it: "
            "infra/bin/build-arctic-inference); nothing was launched for it, and specdec does not serve another "
            "method in its place")


def suffix_failures_now(plan: BenchPlan) -> dict[str, str]:
    """cell_id -> why, for each suffix cell whose serving interpreter cannot import the package (blocking)."""
    if plan.executor == "kubernetes":
        return {}
    failures: dict[str, str] = {}
    works: bool | None = None
    for cell in plan.cells:
        if (cell.speculative_config or {}).get("method") != "suffix":
            continue
        if cell.serve_argv and cell.serve_argv[0] == "vllm" and works is None:
            works = vllm_console_works()
        python = serving_python(cell.serve_argv, console_works=bool(works))
        if python is None:
            continue
        found = probe(python)
        if found.version is None:
            failures[cell.cell_id] = refusal(cell.cell_id, found)
    return failures


async def suffix_failures(plan: BenchPlan) -> dict[str, str]:
    """`suffix_failures_now` off the event loop (each probe starts an interpreter)."""
    return await asyncio.to_thread(suffix_failures_now, plan)
