"""Every surface in the guard (docs/design.md#principle-1-no-inert-configuration): the guard's per-surface count, each
compared
with a total found without the guard's walk, and no surface empty or with a field neither probed nor
inert. The report is printed (`pytest -s`) as the guard's summary."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from mcp import Client

from tests.unit.guard.cli_checks import cli_checks
from tests.unit.guard.fields import mcp_server
from tests.unit.guard.surfaces import report

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def surfaces(ctx, tmp_path_factory):
    return {s.name: s for s in report(tmp_path_factory.mktemp("surfaces"), set(cli_checks(ctx)))}


def _listed_over_tools_list() -> int:
    async def count() -> int:
        async with Client(mcp_server()) as client:
            return sum(len(t.input_schema.get("properties", {})) for t in (await client.list_tools()).tools)

    return asyncio.run(count())


def _documented(page: str, pattern: str) -> int:
    return len(re.findall(pattern, (ROOT / "docs" / page).read_text(), flags=re.M))


def test_every_surface_is_counted_and_covered(surfaces):
    print("\n" + "\n".join(s.line() for s in surfaces.values()))
    for surface in surfaces.values():
        assert surface.fields, f"{surface.name}: no field found; an empty surface cannot pass"
        assert not surface.uncovered, f"{surface.name}: neither probed nor inert: {surface.uncovered}"


def test_each_count_equals_an_independent_total(surfaces):
    # MCP: the properties the server lists over tools/list, through the SDK's client.
    assert len(surfaces["MCP tool arguments"].fields) == _listed_over_tools_list()
    # Settings: the rows of the variables' tables in the docs.
    assert len(surfaces["settings (RuntimeSettings)"].fields) == _documented(
        "configuration.md", r"^\| `SPECDEC_\w+` \|"
    )
    assert len(surfaces["settings (McpSettings)"].fields) == _documented("mcp.md", r"^\| `SPECDEC_(MCP_\w+)` \|")


def test_an_added_field_changes_the_count_and_is_uncovered(surfaces, monkeypatch, tmp_path):
    # The campaign's own self-tests are test_guard_self.py's; the MCP tools' are test_guard_mcp.py's.
    # The settings surfaces: a field added to the class is counted and reported as neither probed nor inert.
    from pydantic import Field

    from services.mcp.auth import McpSettings
    from services.runtime.settings import RuntimeSettings

    for module, cls, surface in (("services.mcp.auth", McpSettings, "settings (McpSettings)"),
                                 ("tests.unit.guard.fields", RuntimeSettings, "settings (RuntimeSettings)")):
        extended = type(cls.__name__, (cls,), {"__annotations__": {"guard_knob": str},
                                               "guard_knob": Field(default="", description="Read by nothing.")})
        with monkeypatch.context() as m:
            m.setattr(f"{module}.{cls.__name__}", extended)
            found = {s.name: s for s in report(tmp_path, set(surfaces["command lines"].probed))}[surface]
        assert len(found.fields) == len(surfaces[surface].fields) + 1
        assert found.uncovered == [f"env SPECDEC_{'guard_knob'.upper()}"], found.uncovered
    # The command lines: an option added to `specdec`.
    from tests.unit.guard import fields

    def with_knob() -> object:
        parser = build_parser()
        parser.add_argument("--guard-knob", help="read by nothing")
        return parser

    build_parser = fields.build_parser
    monkeypatch.setattr(fields, "build_parser", with_knob)
    found = {s.name: s for s in report(tmp_path, set(surfaces["command lines"].probed))}["command lines"]
    assert found.uncovered == ["specdec --guard-knob"], found.uncovered
