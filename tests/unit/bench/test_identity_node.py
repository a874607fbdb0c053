"""The node a trial ran on is in its identity (so the gate can check every compared trial ran on one)."""

from __future__ import annotations

import socket

from contracts import layout
from contracts.campaign import Campaign, Matrix
from services.bench.planning.builder import build_plan
from services.bench.trial import _identity
from tests.unit.bench.planning.test_plan import example, plan_of, shapes_campaign


def _identities(plan) -> dict[str, str | None]:
    baseline = next(cell.cell_id for cell in plan.cells if cell.role == "standing")
    return {cell.cell_id: _identity(cell, concurrency=cell.concurrency[0], trial=0, baseline=baseline).node
            for cell in plan.cells}


def test_a_local_trial_carries_this_hosts_name(tmp_path):
    plan, _ = plan_of(shapes_campaign(["short"]), tmp_path)
    assert set(_identities(plan).values()) == {socket.gethostname()}


def test_a_trial_carries_the_node_its_cell_is_planned_on():
    campaign = Campaign.model_validate(example())
    assert isinstance(campaign.matrix, Matrix)
    plan = build_plan(campaign, campaign.matrix, run_id="toy-20261130-030303-abcdef", default_node="gpu-7",
                      training_output="/drafts/d", prompts={"source": layout.BENCH_PROMPTS})
    assert set(_identities(plan).values()) == {"gpu-7"}
