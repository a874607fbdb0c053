"""No inert configuration on the MCP surfaces (docs/design.md#principle-1-no-inert-configuration): every argument of
every MCP
tool, as the real server lists it over tools/list, and every McpSettings field is walked by the guard
(fields.py) and shown to change what the server does (mcp_checks.py), or stands in an inert table with
its reason (surfaces.py counts them). A tool argument added without a consumer, and a setting added
without a probe, are reported by name."""

from __future__ import annotations

from typing import Annotated

import pytest
from mcp.server.mcpserver.tools import Tool
from pydantic import Field

from services.mcp.auth import McpSettings
from services.mcp.server import build_server
from services.mcp.tools import strict
from tests.unit.guard import mcp_checks
from tests.unit.guard.fields import every_field, mcp_arguments, mcp_settings_fields

CHECKS = mcp_checks.checks()


def test_the_walk_sees_the_mcp_tools_and_their_settings():
    fields = set(every_field())
    assert {"mcp evidence_init.family", "mcp campaign_run.wait_for_plans_s", "env SPECDEC_MCP_TOKEN_ENV"} <= fields


def test_every_mcp_argument_has_a_check():
    arguments = set(mcp_arguments())
    assert arguments, "the walk found no MCP tool argument: an empty surface cannot pass"
    assert sorted(arguments - set(CHECKS)) == [], "MCP arguments without a check: add each to mcp_checks.CHANGES"
    assert sorted(set(CHECKS) - arguments) == [], "checks name arguments no tool has"


@pytest.mark.parametrize("argument", sorted(CHECKS))
def test_changing_the_argument_changes_what_the_tool_does(argument, tmp_path):
    tool, base, changed = CHECKS[argument]
    before, again, after = mcp_checks.observe(tool, [base, base, changed], tmp_path)
    assert again == before, f"{tool} {base} is not deterministic"
    assert before[0], f"{tool} {base} reached no use case: it cannot show {argument}"
    assert after != before, f"{argument} changed nothing the tool calls or refuses"


def test_every_mcp_setting_has_a_probe(tmp_path):
    assert set(mcp_checks.settings_probes(tmp_path)) == set(mcp_settings_fields()) != set()


@pytest.mark.parametrize("field", mcp_settings_fields())
def test_changing_the_mcp_setting_changes_what_the_server_does(field, tmp_path):
    base, changed = mcp_checks.settings_probes(tmp_path)[field]
    assert base() != changed(), f"{field} changed nothing"


# --- the guard fails as it should -----------------------------------------------------------------------------


def _with_knob(deps):
    """The real server, with an argument added to a tool that its body never reads."""
    server = build_server(deps)

    async def evidence_init(family: str, knob: Annotated[int, Field(description="Read by nothing.")] = 0) -> None:
        from services.app.workflow import workflow

        await workflow.evidence_init(None, family, None)  # type: ignore[arg-type]  # refused before any session use

    server.remove_tool("evidence_init")
    server._tool_manager._tools["evidence_init"] = strict(Tool.from_function(evidence_init))
    return server


def test_a_tool_argument_added_without_a_consumer_is_reported_by_name(tmp_path, monkeypatch):
    from tests.unit.guard import fields

    knob = "mcp evidence_init.knob"
    assert knob in fields.mcp_arguments(_with_knob(mcp_checks._deps([], tmp_path))), "the walk must find it"
    assert knob not in CHECKS, "the coverage test names it: it has no check"
    base, changed = mcp_checks.observe("evidence_init", [{"family": "toy-llama"}, {"family": "toy-llama", "knob": 3}],
                                       tmp_path, server_of=_with_knob)
    assert base[0] == [("evidence_init", [None, "toy-llama", None], {})], base
    assert base == changed, "the verdict must see that the knob changes nothing"


def test_a_setting_added_to_mcp_settings_is_reported_by_name(tmp_path, monkeypatch):
    extended = type("McpSettings", (McpSettings,), {"__annotations__": {"mcp_knob": str},
                                                    "mcp_knob": Field(default="", description="Read by nothing.")})
    monkeypatch.setattr("services.mcp.auth.McpSettings", extended)
    knob = (
        f"env SPECDEC_{'mcp_knob'.upper()}"  # spelt so: no such variable exists (tests/unit/guard/test_environment.py)
    )
    assert knob in mcp_settings_fields()
    assert set(mcp_settings_fields()) - set(mcp_checks.settings_probes(tmp_path)) == {knob}
