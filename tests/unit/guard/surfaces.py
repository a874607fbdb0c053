"""The guard's count per surface: how many operator-settable fields each surface has, and how many are
probed (a check shows a change of them changing what runs or what is recorded), inert (contracts/inert.py
INERT) or conditionally inert (INERT_WHERE: inert only where its condition holds, probed elsewhere).

`report()` is what test_surfaces.py prints and checks: every field of every surface is probed or
inert, no surface is empty, and each count equals a total found independently of the guard's walk.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from contracts.inert import INERT, INERT_WHERE
from tests.unit.guard import fields, mcp_checks
from tests.unit.guard.campaign_checks import CHECKS, SELECTOR_CHECKS
from tests.unit.guard.cli_checks import request_input_keys
from tests.unit.guard.test_runtime_settings import PROBES


@dataclass(frozen=True)
class Surface:
    name: str
    fields: tuple[str, ...]
    probed: frozenset[str]
    inert: frozenset[str] = frozenset()
    conditional: frozenset[str] = frozenset()

    @property
    def uncovered(self) -> list[str]:
        return sorted(set(self.fields) - self.probed - self.inert)

    def line(self) -> str:
        return (f"{self.name}: {len(self.fields)} fields, {len(self.probed & set(self.fields))} probed, "
                f"{len(self.inert & set(self.fields))} inert, {len(self.conditional & set(self.fields))} "
                "conditionally inert")


def report(tmp: Path, cli_checked: set[str]) -> list[Surface]:
    """Every surface the guard walks. `cli_checked`: the CLI arguments with a checker (cli_checks.cli_checks)."""
    campaign = [*fields.campaign_fields(), *fields.selector_keys()]
    cli = sorted([name.removeprefix("cli ") for name in fields.cli_arguments()] + request_input_keys())
    return [
        Surface("campaign", tuple(campaign), frozenset(CHECKS) | frozenset(SELECTOR_CHECKS), frozenset(INERT),
                frozenset(INERT_WHERE)),
        Surface("settings (RuntimeSettings)", tuple(fields.settings_fields()),
                frozenset(f"env SPECDEC_{name.upper()}" for name in PROBES)),
        Surface("settings (McpSettings)", tuple(fields.mcp_settings_fields()),
                frozenset(mcp_checks.settings_probes(tmp))),
        Surface("command lines", tuple(cli), frozenset(cli_checked)),
        Surface("MCP tool arguments", tuple(fields.mcp_arguments()), frozenset(mcp_checks.checks())),
    ]
