"""Caller-chosen run IDs and the reusable steps of a submit (services/app/campaign/submit.py), and approving
named plans (services/app/runs/ops.py approve_plans), against a real Redis."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from contracts import layout
from contracts.envelope import ArtifactRef
from contracts.events import RunApproved, TrainingPlanned
from services.app.campaign import submit
from services.app.context import connect
from services.app.runs import ops
from services.runtime.errors import ConfigurationError
from services.runtime.settings import RuntimeSettings

EXAMPLE = Path(__file__).resolve().parents[3] / "infra/examples/campaign.yaml"


@pytest.mark.parametrize("run_id", ["ab", "My-run", "my_run", "my.run", "-my-run", "my-run-", "a" * 64, "run\n"])
def test_a_run_id_the_contracts_refuse_is_refused(run_id: str) -> None:
    with pytest.raises(submit.RunIdRefused, match="experiment=<run-id> label"):
        submit.check_run_id(run_id)


@pytest.mark.parametrize("run_id", ["abc", "exp-2026-12-01-a", "a" * 63, "0run9"])
def test_a_label_safe_run_id_is_accepted(run_id: str) -> None:
    assert submit.check_run_id(run_id) == run_id


async def test_submit_takes_the_callers_id_once_and_stores_what_it_always_stored(settings: RuntimeSettings) -> None:
    async with connect(settings) as cli:
        run_id = await submit.submit(cli, EXAMPLE, experiment_id="caller-run-7")
        assert run_id == "caller-run-7"
        kept = {ref.uri.split("/", 3)[3] for ref in cli.bundle.artifacts(run_id)}
        assert {layout.CAMPAIGN_YAML, layout.CAMPAIGN, layout.OPERATOR_COMMANDS, layout.OPERATOR_REVISIONS} <= kept, (
            kept
        )
        events = await ops.journal(cli, run_id)
        assert [e["schema"] for e in events] == ["campaign.submitted"]
        with pytest.raises(submit.RunIdRefused, match="in use: run caller-run-7 already has a bundle folder"):
            await submit.submit(cli, EXAMPLE, experiment_id="caller-run-7")
        generated = await submit.submit(cli, EXAMPLE)
        assert generated.startswith("toy-llama-") and generated != run_id
    client = redis.Redis.from_url(settings.redis_url)
    assert client.xlen(f"{settings.stream_prefix}.campaign.submitted") == 2
    client.close()


async def test_an_id_with_events_but_no_bundle_is_in_use(settings: RuntimeSettings) -> None:
    async with connect(settings) as cli:
        await cli.bus.publish(_planned("ghost-run", "a" * 64))
        with pytest.raises(submit.RunIdRefused, match="1 event"):
            await submit.create_run(cli, "toy-llama", "ghost-run")
    assert not (settings.bundle_root / "ghost-run").exists()


async def test_a_malformed_id_is_refused_before_the_campaign_is_read(settings: RuntimeSettings, tmp_path: Path) -> None:
    async with connect(settings) as cli:
        with pytest.raises(submit.RunIdRefused):
            await submit.submit(cli, tmp_path / "no-such-campaign.yaml", experiment_id="Bad_ID")
    assert not settings.bundle_root.exists()


async def test_a_run_holds_one_campaign(settings: RuntimeSettings) -> None:
    async with connect(settings) as cli:
        run_id = await submit.create_run(cli, "toy-llama", "one-campaign")
        assert await submit.open_run(cli, run_id) == run_id  # empty: the campaign may come later
        prepared = submit.prepare_campaign(EXAMPLE)
        submit.store_campaign(cli.bundle, run_id, prepared)
        with pytest.raises(ConfigurationError, match="already holds a campaign"):
            submit.store_campaign(cli.bundle, run_id, prepared)
        with pytest.raises(submit.RunIdRefused, match="already holds a campaign"):
            await submit.open_run(cli, run_id)


def _planned(run_id: str, sha: str) -> TrainingPlanned:
    plan = ArtifactRef(uri=f"bundle://{run_id}/training/plan.json", sha256=sha, size_bytes=10)
    return TrainingPlanned(run_id=run_id, producer="test", plan=plan, executor="local", node="n1")


async def test_approve_plans_approves_the_named_pending_plans_only(settings: RuntimeSettings) -> None:
    run_id, known, other = "named-plans", "b" * 64, "c" * 64
    async with connect(settings) as cli:
        await cli.bus.publish(_planned(run_id, known))
        with pytest.raises(ConfigurationError, match=f"no plan awaiting approval with sha256 {other}.*{known}"):
            await ops.approve_plans(cli, run_id, [other], acknowledged=True)
        with pytest.raises(ConfigurationError, match="typed acknowledgement"):
            await ops.approve_plans(cli, run_id, [known], acknowledged=False)
        with pytest.raises(ConfigurationError, match="name the sha256"):
            await ops.approve_plans(cli, run_id, [], acknowledged=True)
        event = await ops.approve_plans(cli, run_id, [known, known], acknowledged=True)
        assert event.plan_sha256s == [known]
        approvals = [e for e in await ops.journal(cli, run_id) if e["schema"] == RunApproved.SCHEMA]
        assert [a["plan_sha256s"] for a in approvals] == [[known]]
        with pytest.raises(ConfigurationError, match="awaiting approval: none"):
            await ops.approve_plans(cli, run_id, [known], acknowledged=True)
