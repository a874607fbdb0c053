"""No SPECDEC_* variable dropped silently (docs/design.md#principle-1-no-inert-configuration): one registry names every
variable
specdec reads, sets on its children or reads in its scripts (services/runtime/environment.py), and every
entry point refuses a name outside it at start, naming the variable and the nearest known name, on one
line, exit status 2, no traceback.

`SPECDEC_STREAM_PREFX=typo specdec status RUN` once ran on the default prefix and said nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
TYPO = "SPECDEC_STREAM_PREFX"

# Names the grep finds that are not environment variables, or are unknown on purpose.
NOT_VARIABLES = {
    "SPECDEC_KEYS": "a Python constant (contracts/artifacts/results.py), not an environment variable",
    "SPECDEC_NOT_A_SETTING": "tests/unit/runtime/test_deployment.py: a name that must be refused",
    "SPECDEC_GUARD_PUBLISH_TOKEN": "tests/unit/guard/test_runtime_settings.py: the variable a *_TOKEN_ENV setting "
                                   "names "
    "in a probe (accepted when a *_TOKEN_ENV setting names it)",
    "SPECDEC_LAKE_TOKEN": "this test's token variable, known because SPECDEC_PUBLISH_TOKEN_ENV names it",
    TYPO: "this test's misspelt name",
}


def _grepped() -> set[str]:
    out = subprocess.run(["git", "grep", "-h", "-o", "-I", "-E", r"SPECDEC_[A-Z0-9_]*[A-Z0-9](_\*)?"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return {name for name in out.split() if not name.endswith("_*")}  # `SPECDEC_COMPOSE_*` names a family


def test_every_specdec_name_in_the_repository_is_in_the_registry():
    from services.runtime.environment import KNOWN

    found = _grepped()
    assert {"SPECDEC_REDIS_URL", "SPECDEC_COMPOSE_RUN", "SPECDEC_EXPERIMENT"} <= found, "the grep found too little"
    unknown = sorted(found - set(KNOWN) - set(NOT_VARIABLES))
    assert unknown == [], f"SPECDEC_* names used in the repository but missing from the registry: {unknown}"


def test_every_settings_field_is_in_the_registry():
    from services.mcp.auth import McpSettings
    from services.runtime.environment import KNOWN
    from services.runtime.settings import RuntimeSettings

    for model in (RuntimeSettings, McpSettings):
        missing = [f"SPECDEC_{name.upper()}" for name in model.model_fields if f"SPECDEC_{name.upper()}" not in KNOWN]
        assert missing == [], f"{model.__name__} reads {missing}, which the registry lacks"


def test_a_misspelt_variable_stops_specdec_status_with_the_nearest_name():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECDEC_")}
    env.update({TYPO: "typo", "PYTHONPATH": str(ROOT)})
    out = subprocess.run([sys.executable, "-m", "services.cli.main", "status", "some-run"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert TYPO in lines[0] and "SPECDEC_STREAM_PREFIX" in lines[0], lines[0]


def _entry_points(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """Every entry point's main, with what it would start stubbed out: the refusal must come first."""
    from services.cli import demo
    from services.cli import main as cli
    from services.mcp import command
    from services.runtime import main as runtime_main
    from services.runtime.health import healthcheck

    started: list[str] = []

    async def run(*args: object, **kwargs: object) -> None:
        started.append("service")

    monkeypatch.setattr(runtime_main, "run", run)
    monkeypatch.setattr(demo, "_run", lambda *a, **k: started.append("demo") or 0)  # type: ignore[func-returns-value]  # note it, then return
    monkeypatch.setattr("services.mcp.server.serve", lambda *a, **k: started.append("mcp") or 0)  # type: ignore[func-returns-value]  # note it, then return
    monkeypatch.setattr(healthcheck, "check", lambda *a, **k: (started.append("health") or True, ""))  # type: ignore[func-returns-value]  # note it, then return
    return {
        "specdec": lambda: cli.main(["--help"]),
        "specdec demo": lambda: demo.main([]),
        "python -m services.mcp": lambda: command.main([]),
        "python -m services.runtime.main": lambda: runtime_main.main(["profiler"]),
        "healthcheck": lambda: healthcheck.main(["check", "--port", "8080"]),
    }


def test_every_entry_point_refuses_an_unknown_name_and_accepts_known_ones(monkeypatch, capsys):
    for name in [k for k in os.environ if k.startswith("SPECDEC_")]:
        monkeypatch.delenv(name)
    # Known but not read here: a script's variable, a child's label, a variable a *_TOKEN_ENV setting names.
    monkeypatch.setenv("SPECDEC_COMPOSE_RUN", "x")
    monkeypatch.setenv("SPECDEC_EXPERIMENT", "some-run")
    monkeypatch.setenv("SPECDEC_PUBLISH_TOKEN_ENV", "SPECDEC_LAKE_TOKEN")
    monkeypatch.setenv("SPECDEC_LAKE_TOKEN", "t" * 20)
    monkeypatch.setenv(TYPO, "typo")
    for name, call in _entry_points(monkeypatch).items():
        capsys.readouterr()
        try:
            rc = call()
        except SystemExit as exc:  # argparse's --help
            rc = exc.code
        err = capsys.readouterr().err.strip()
        assert rc == 2, f"{name} ran with {TYPO} set (exit {rc})"
        assert len(err.splitlines()) == 1 and re.search(rf"{TYPO}\b.*SPECDEC_STREAM_PREFIX", err), f"{name}: {err}"
        assert "SPECDEC_COMPOSE_RUN" not in err and "SPECDEC_LAKE_TOKEN" not in err, f"{name}: {err}"
