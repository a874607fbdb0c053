"""No argument dropped silently (docs/design.md#principle-1-no-inert-configuration): every MCP tool's input schema
forbids additional properties, the server refuses an argument no tool declares by its name, and a declared
argument that a mode would ignore is refused in that mode (campaign_run's wait_for_plans_s on a live
call) or consumed (evidence_init's family beside an experiment_id: checked by campaign_init).

Through the SDK's in-process client against a real Redis, as test_tools.py: what the server lists over
tools/list and what a client's call gets back."""

from __future__ import annotations

from pathlib import Path

import redis

from services.mcp.tools import family_key
from tests.unit.mcp.test_tools import EXAMPLE, _ok, _refused, _streams, serving


async def test_every_tool_schema_forbids_additional_properties(settings):
    async with serving(settings) as client:
        tools = (await client.list_tools()).tools
        assert len(tools) == 13  # the ten typed tools and the workflow's three args-shaped verbs
        loose = sorted(t.name for t in tools if t.input_schema.get("additionalProperties") is not False)
        assert loose == [], f"tools whose input schema allows undeclared arguments: {loose}"


async def test_an_undeclared_argument_is_refused_by_name_and_does_nothing(settings):
    async with serving(settings) as client:
        text = await _refused(client, "evidence_init", family="toy-llama", experiment_id="bogus-run", bogus=1)
        assert "'bogus'" in text and "evidence_init" in text
        assert "\n" not in text and text.startswith("evidence_init: "), text  # one line, as every entry point
        assert not (settings.bundle_root / "bogus-run").exists()
        text = await _refused(client, "campaign_status", run_id="bogus-run", verbose=True)
        assert "'verbose'" in text and "\n" not in text
        text = await _refused(client, "campaign_status", run_id=7)  # a wrong type: pydantic's words, one line
        assert text.startswith("campaign_status: invalid input: run_id") and "\n" not in text, text
        assert _streams(settings) == []


async def test_evidence_init_family_beside_an_experiment_id_is_checked_by_campaign_init(settings):
    async with serving(settings) as client:
        made = await _ok(client, "evidence_init", family="other-family", experiment_id="family-run")
        assert made["run_id"] == "family-run"
        text = await _refused(client, "campaign_init", config=str(EXAMPLE), experiment_id="family-run",
                              family="toy-llama")
        assert "other-family" in text and "evidence_init" in text
        assert list(Path(made["bundle_path"]).iterdir()) == []
        await _ok(client, "evidence_init", family="toy-llama", experiment_id="family-ok")
        assert _family_keys(settings) == {b"family-run", b"family-ok"}
        await _ok(client, "campaign_init", config=str(EXAMPLE), experiment_id="family-ok", family="toy-llama")
        assert _family_keys(settings) == {b"family-run"}  # consumed once the campaign (and its family) is stored


def _family_keys(settings) -> set[bytes]:
    client = redis.Redis.from_url(settings.redis_url)
    try:
        keys = client.scan_iter(match=family_key(settings.stream_prefix, "*"))
        return {key.rsplit(b":", 1)[1] for key in keys}
    finally:
        client.close()


async def test_wait_for_plans_s_on_a_live_call_is_refused_with_the_reason(settings):
    async with serving(settings) as client:
        await _ok(client, "campaign_init", config=str(EXAMPLE), experiment_id="live-wait", family="toy-llama")
        text = await _refused(client, "campaign_run", run_id="live-wait", i_understand_this_mutates_cluster=True,
                              plan_sha256s=["a" * 64], wait_for_plans_s=5)
        assert "wait_for_plans_s" in text and "dry run" in text
        assert _streams(settings) == []
