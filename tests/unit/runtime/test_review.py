"""The review point as one mechanism (services/runtime/review.py), on a real bundle store.

A stand-in step plans a tiny plan and counts its executions; the campaign's
pre-approval policy (`review.pre_approve`, with the acknowledgement) and the
approvals decide what runs: the acknowledgement alone runs nothing. The trainer-proxy and the
bench-runner use the same mechanism (tests/integration/test_trainer_proxy.py,
test_bench_service.py run it against Redis and real services).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from pydantic import Field

from contracts import layout
from contracts.campaign import Campaign
from contracts.envelope import ArtifactRef, Event, Strict
from contracts.events import BenchPlanned, BenchRequested, CapacitySelected, RunApproved, TrainingCompleted
from services.runtime.bundle.bundle import BundleStore
from services.runtime.delivery.consumer import StepContext
from services.runtime.delivery.upstream import latest
from services.runtime.errors import StepFailed
from services.runtime.review import Reviewed, per_event
from services.runtime.settings import RuntimeSettings

ROOT = Path(__file__).resolve().parents[3]
RUN = "toy-20261201-010101-abcdef"


class TinyPlan(Strict):
    cells: list[str] = Field(description="What the plan would run.")


class Bus:
    def __init__(self) -> None:
        self.events: list[Event] = []

    async def publish(self, event: Event) -> None:
        self.events.append(event)


def store_campaign(bundle: BundleStore, *, acknowledged: bool, pre_approve: tuple[str, ...] = ()) -> None:
    data: dict[str, Any] = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["acknowledgements"]["i_understand_this_mutates_cluster"] = acknowledged
    data["review"] = {"pre_approve": list(pre_approve)}
    bundle.write_json(RUN, layout.CAMPAIGN, Campaign.model_validate(data))


class Step:
    """A reviewed step whose plan is fixed and whose execution is counted."""

    def __init__(self, bundle: BundleStore, *, skip: bool = False) -> None:
        self.executed: list[TinyPlan] = []
        self.review = Reviewed(
            bundle=bundle, step="bench", service="bench-runner", plan_path=layout.BENCH_PLAN, plan_model=TinyPlan,
            planned_schema=BenchPlanned.SCHEMA, plan=self.plan, announce=self.announce, execute=self.execute,
            skip=(lambda campaign, event, producer: []) if skip else None,
        )
        self.bundle = bundle

    def plan(self, campaign: Campaign, event: Event) -> tuple[TinyPlan, ArtifactRef]:
        plan = TinyPlan(cells=["standing", "ngram"])
        return plan, self.bundle.write_json(event.run_id, layout.BENCH_PLAN, plan)

    @staticmethod
    def announce(event: Event, plan: TinyPlan, ref: ArtifactRef, producer: str) -> Event:
        return event.caused(BenchPlanned, producer=producer, plan=ref, cells=plan.cells, trials=1)

    # services/runtime/review.py's Executor, as the bench's and trainer's executors are.
    async def execute(self, campaign: Campaign, plan: TinyPlan, ref: ArtifactRef, event: Event, *,
                      ctx: StepContext) -> list[Event]:
        self.executed.append(plan)
        return []


def ctx(bus: Bus) -> StepContext:
    return StepContext(service="bench-runner", settings=RuntimeSettings(instance="unit"),
                       bus=bus, log=structlog.get_logger())  # type: ignore[arg-type]  # the recording Bus above


def request() -> Event:
    return BenchRequested(run_id=RUN, producer="cli/test", requested_by="test")


def approval(*shas: str) -> RunApproved:
    return RunApproved(run_id=RUN, producer="cli/test", i_understand_this_mutates_cluster=True,
                       plan_sha256s=list(shas), approved_by="test")


async def test_a_plan_waits_for_an_approval_naming_its_hash_and_runs_once_on_it(tmp_path: Path) -> None:
    bundle = BundleStore(tmp_path)
    store_campaign(bundle, acknowledged=False)
    step, bus = Step(bundle), Bus()
    planned = await step.review.on_trigger(request(), ctx(bus))
    assert [e.SCHEMA for e in planned] == ["bench.planned"] and step.executed == []
    sha = planned[0].plan.sha256  # type: ignore[attr-defined]  # a BenchPlanned: its plan's ref
    # Announced once: a redelivered trigger (the journal holds the first announcement) emits nothing.
    bundle.append_event(RUN, planned[0].event_id, planned[0].to_json())
    assert await step.review.on_trigger(request(), ctx(bus)) == []
    assert await step.review.on_approved(approval("f" * 64), ctx(bus)) == [] and step.executed == []
    await step.review.on_approved(approval(sha), ctx(bus))
    assert step.executed == [TinyPlan(cells=["standing", "ngram"])]


async def test_the_acknowledgement_alone_stores_and_announces_the_plan_and_runs_it_only_on_an_approval_of_its_hash(
    tmp_path: Path,
) -> None:
    bundle = BundleStore(tmp_path)
    store_campaign(bundle, acknowledged=True)  # no pre-approval policy
    step, bus = Step(bundle), Bus()
    planned = await step.review.on_trigger(request(), ctx(bus))
    assert [e.SCHEMA for e in planned] == ["bench.planned"] and bus.events == [] and step.executed == []
    sha = planned[0].plan.sha256  # type: ignore[attr-defined]  # a BenchPlanned: its plan's ref
    assert sha == bundle.ref(RUN, layout.BENCH_PLAN).sha256, "the announced plan is the stored one"
    assert await step.review.on_approved(approval("e" * 64), ctx(bus)) == [] and step.executed == []
    await step.review.on_approved(approval(sha), ctx(bus))
    assert step.executed == [TinyPlan(cells=["standing", "ngram"])]


async def test_a_policy_naming_another_step_does_not_pre_approve_this_one(tmp_path: Path) -> None:
    bundle = BundleStore(tmp_path)
    store_campaign(bundle, acknowledged=True, pre_approve=("training",))
    step, bus = Step(bundle), Bus()  # the stand-in is the bench step
    planned = await step.review.on_trigger(request(), ctx(bus))
    assert [e.SCHEMA for e in planned] == ["bench.planned"] and step.executed == []
    sha = planned[0].plan.sha256  # type: ignore[attr-defined]  # a BenchPlanned: its plan's ref
    await step.review.on_approved(approval(sha), ctx(bus))
    assert len(step.executed) == 1


async def test_a_pre_approved_campaign_announces_then_runs_at_its_trigger_and_ignores_the_approval(
    tmp_path: Path,
) -> None:
    bundle = BundleStore(tmp_path)
    store_campaign(bundle, acknowledged=True, pre_approve=("bench",))
    step, bus = Step(bundle), Bus()
    assert await step.review.on_trigger(request(), ctx(bus)) == []
    assert [e.SCHEMA for e in bus.events] == ["bench.planned"] and len(step.executed) == 1
    sha = bus.events[0].plan.sha256  # type: ignore[attr-defined]  # a BenchPlanned: its plan's ref
    assert await step.review.on_approved(approval(sha), ctx(bus)) == [] and len(step.executed) == 1


async def test_a_plan_changed_after_planning_never_runs(tmp_path: Path) -> None:
    bundle = BundleStore(tmp_path)
    store_campaign(bundle, acknowledged=True)
    step = Step(bundle)
    planned = await step.review.on_trigger(request(), ctx(Bus()))
    sha = planned[0].plan.sha256  # type: ignore[attr-defined]  # a BenchPlanned: its plan's ref
    (bundle.run_dir(RUN) / layout.BENCH_PLAN).write_text(json.dumps({"cells": ["something-else"]}))
    with pytest.raises(StepFailed) as failed:
        await step.review.on_approved(approval(sha), ctx(Bus()))
    assert failed.value.error_type == "PlanCorrupt" and step.executed == []


async def test_a_skipping_step_stores_no_plan_and_a_missing_campaign_fails_the_step(tmp_path: Path) -> None:
    bundle = BundleStore(tmp_path)
    with pytest.raises(StepFailed) as missing:
        await Step(bundle).review.on_trigger(request(), ctx(Bus()))
    assert missing.value.error_type == "CampaignMissing"
    store_campaign(bundle, acknowledged=True, pre_approve=("bench",))
    step = Step(bundle, skip=True)
    assert await step.review.on_trigger(request(), ctx(Bus())) == []
    assert not (bundle.run_dir(RUN) / layout.BENCH_PLAN).exists() and step.executed == []


def test_routes_are_the_triggers_with_their_keys_then_the_approval(tmp_path: Path) -> None:
    routes = Step(BundleStore(tmp_path)).review.routes([(BenchRequested.SCHEMA, per_event)])
    assert [(r.schema, r.failure_step) for r in routes] == [("bench.requested", "bench"), ("run.approved", "bench")]
    event = request()
    assert routes[0].step_key(event) == event.event_id


def test_upstream_reads_the_latest_event_of_a_schema_through_its_contract(tmp_path: Path) -> None:
    bundle = BundleStore(tmp_path)
    snapshot = ArtifactRef(uri=f"bundle://{RUN}/capacity/x/snapshot.json", sha256="a" * 64, size_bytes=1)
    for node in ("node-a", "node-b"):
        selected = CapacitySelected(run_id=RUN, producer="capacity/t", scheduler="slurm", node=node, snapshot=snapshot)
        bundle.append_event(RUN, selected.event_id, selected.to_json())
    found = latest(bundle, RUN, CapacitySelected)
    assert isinstance(found, CapacitySelected) and found.node == "node-b"
    assert latest(bundle, RUN, TrainingCompleted) is None
