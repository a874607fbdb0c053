"""The warm-interleaved regime: the block order (services/bench/planning/interleave.py), the campaign's
all-or-none rule, the plan that records the blocks (warm and cold plans unchanged), and the
rotation itself against a fake bench run (servers, blocks, failures, adoption)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

import orjson
import pytest
from pydantic import ValidationError

from contracts import layout
from contracts.artifacts.results import TrialIdentity
from contracts.campaign import Campaign, Cell, Matrix
from services.bench.errors import ServerNotReady, SpeculationNotActive
from services.bench.planning import interleave
from services.bench.planning.builder import build_plan
from services.bench.planning.interleave import block_order, launch_order, run_interleaved
from services.bench.planning.model import BenchPlan, Block, CellPlan, Launch
from services.runtime.bundle.bundle_records import canonical_json
from services.shared.plan_view import plan_lines
from tests.unit.bench.planning.test_plan import example

RUN = "toy-20261130-030303-abcdef"
INTERLEAVED = "warm-interleaved"


def cell(cell_id: str, trials: int = 3, *, role: str = "candidate", regime: str = INTERLEAVED,
         concurrency: Sequence[int] = (1, 4), node: str = "n1") -> CellPlan:
    return CellPlan(cell_id=cell_id, role=role, regime=regime, trials=trials, concurrency=list(concurrency),
                    node=node, identity={}, speculative_config=None, serve_argv=["serve", "{port}"],
                    serve_source="builtin", bench="builtin", eval="builtin")


CELLS = [cell("standing", role="standing"), cell("ngram-k3"), cell("draft-k3"), cell("eagle-k3")]


# --- the block order -----------------------------------------------------------------------


def test_the_block_order_is_the_same_for_a_run_and_differs_between_runs() -> None:
    assert block_order(RUN, CELLS) == block_order(RUN, CELLS)
    others = {tuple(tuple(b.order) for b in block_order(f"toy-20261130-030303-{i:06x}", CELLS)) for i in range(20)}
    assert len(others) > 1  # seeded by the run ID: other runs get other orders


def test_each_block_is_a_permutation_of_the_cells_and_measures_trial_b() -> None:
    blocks = block_order(RUN, CELLS)
    assert [b.index for b in blocks] == [0, 1, 2]
    for block in blocks:
        assert sorted(block.order) == sorted(c.cell_id for c in CELLS)


def test_a_cell_with_fewer_trials_is_in_the_early_blocks_only() -> None:
    cells = [cell("standing", 3, role="standing"), cell("ngram-k3", 5), cell("draft-k3", 4)]
    blocks = block_order(RUN, cells)
    assert [sorted(b.order) for b in blocks] == [
        ["draft-k3", "ngram-k3", "standing"], ["draft-k3", "ngram-k3", "standing"],
        ["draft-k3", "ngram-k3", "standing"], ["draft-k3", "ngram-k3"], ["ngram-k3"]]


def test_plans_without_interleaved_cells_have_no_blocks() -> None:
    assert block_order(RUN, [cell("standing", role="standing", regime="warm"), cell("b", regime="cold")]) == []


# --- the campaign: every cell or none --------------------------------------------------------


def matrix_data(*regimes: str) -> dict[str, Any]:
    roles = ["standing", *["candidate"] * (len(regimes) - 1)]
    return {"cells": [{"cell_id": f"c{i}", "role": role, "regime": regime}
                      for i, (role, regime) in enumerate(zip(roles, regimes, strict=False))]}


def test_a_matrix_that_interleaves_some_cells_only_is_refused_naming_them() -> None:
    with pytest.raises(ValidationError) as caught:
        Matrix.model_validate(matrix_data(INTERLEAVED, "warm", INTERLEAVED))
    message = str(caught.value)
    assert "['c0', 'c2'] are regime warm-interleaved but {'c1': 'warm'} are not" in message
    assert "set regime: warm-interleaved on every cell, or on none" in message


def test_a_matrix_that_interleaves_every_cell_or_none_is_accepted() -> None:
    assert {c.regime for c in Matrix.model_validate(matrix_data(INTERLEAVED, INTERLEAVED)).cells} == {INTERLEAVED}
    assert [c.regime for c in Matrix.model_validate(matrix_data("warm", "cold")).cells] == ["warm", "cold"]


def test_the_campaign_refuses_a_partly_interleaved_matrix() -> None:
    data = example()
    data["matrix"]["cells"][1]["regime"] = INTERLEAVED
    with pytest.raises(ValidationError, match="warm-interleaved rotates the trials across every cell"):
        Campaign.model_validate(data)


# --- the plan --------------------------------------------------------------------------------


def plan_for(regime: str | None, run_id: str = RUN) -> BenchPlan:
    data = example()
    for item in data["matrix"]["cells"]:
        if regime is not None:
            item["regime"] = regime
    campaign = Campaign.model_validate(data)
    assert isinstance(campaign.matrix, Matrix)
    return build_plan(campaign, campaign.matrix, run_id=run_id, default_node="n1", training_output="/drafts/d",
                      prompts={"source": layout.BENCH_PROMPTS})


def test_an_interleaved_plan_starts_every_server_once_and_records_its_blocks() -> None:
    plan = plan_for(INTERLEAVED)
    assert [(launch.cell_id, launch.trials) for launch in plan.launches] == [
        (cell_id, [0, 1, 2]) for cell_id in launch_order(RUN, plan.cells)]
    assert sorted(launch.cell_id for launch in plan.launches) == ["draft-k3", "ngram-k3", "standing"]
    assert plan.blocks == block_order(RUN, plan.cells) and len(plan.blocks) == 3
    assert "all up at once until the last block" in plan.deployment_changes[0]
    assert plan.cleanup[0].startswith("after the last block")
    assert "before every measured window" in plan.warmup
    stored = orjson.loads(canonical_json(plan))
    assert stored["blocks"] == [b.model_dump() for b in plan.blocks]
    assert BenchPlan.model_validate(stored) == plan  # read back for execution as approved


def test_the_plan_summary_shows_the_block_order() -> None:
    plan = plan_for(INTERLEAVED)
    lines = plan_lines("bench", orjson.loads(canonical_json(plan)))
    first = plan.blocks[0].order  # type: ignore[index]  # an interleaved plan has blocks
    assert "blocks (block b measures trial b of each cell, in this order):" in lines
    assert f"  0: {', '.join(first)}" in lines


@pytest.mark.parametrize("regime", [None, "cold"])
def test_warm_and_cold_plans_store_no_blocks_key(regime: str | None) -> None:
    plan = plan_for(regime)
    assert plan.blocks is None
    stored = orjson.loads(canonical_json(plan))
    assert "blocks" not in stored and "blocks" not in plan.model_dump(mode="json")
    assert BenchPlan.model_validate(stored) == plan
    assert "one at a time" in plan.deployment_changes[0]


# --- the rotation against a fake bench run -----------------------------------------------------


class FakeServer:
    def __init__(self, cell_id: str) -> None:
        self.cell_id = cell_id
        self.base_url = f"http://{cell_id}"


class FakeRun:
    """Records every step in order; `fail` names what fails, `adopted` what an earlier attempt recorded."""

    def __init__(self, cells: list[CellPlan], *, fail: dict[tuple[Any, ...], BaseException] | None = None,
                 adopted: set[tuple[str, int, int]] | None = None, busy: str | None = None) -> None:
        self.cells = {c.cell_id: c for c in cells}
        self.outcome: dict[str, str] = {}
        self.log: list[tuple[Any, ...]] = []
        self.fail = fail or {}
        self.adopted = adopted or set()
        self.busy = busy

    @property
    def failed(self) -> dict[str, str]:
        return self.outcome

    def _maybe_fail(self, *key: Any) -> None:
        if key in self.fail:
            raise self.fail[key]

    async def recheck(self, node: str) -> str | None:
        self.log.append(("recheck", node))
        return self.busy

    def pending(self, cell: CellPlan, trials: Sequence[int]) -> list[tuple[int, int]]:
        return [(t, c) for t in trials for c in cell.concurrency if (cell.cell_id, t, c) not in self.adopted]

    async def open_server(self, index: int, cell: CellPlan, launch: Launch) -> FakeServer:
        self.log.append(("start", cell.cell_id, index))
        self._maybe_fail("start", cell.cell_id)
        return FakeServer(cell.cell_id)

    async def close_server(self, server: FakeServer) -> None:
        self.log.append(("stop", server.cell_id))

    async def measure(self, cell: CellPlan, base_url: str, trial: int, concurrency: int) -> tuple[str, int, int]:
        assert base_url == f"http://{cell.cell_id}"
        self.log.append(("measure", cell.cell_id, trial, concurrency))
        self._maybe_fail("measure", cell.cell_id, trial, concurrency)
        return cell.cell_id, trial, concurrency

    async def record(self, window: tuple[str, int, int]) -> None:
        self.log.append(("record", *window))
        self._maybe_fail("record", *window)


def launches(cells: list[CellPlan]) -> list[tuple[int, Launch]]:
    return [(i, Launch(cell_id=c.cell_id, trials=list(range(c.trials)))) for i, c in enumerate(cells)]


def steps(run: FakeRun, kind: str) -> list[tuple[Any, ...]]:
    return [entry[1:] for entry in run.log if entry[0] == kind]


async def test_every_server_starts_before_the_first_window_and_stops_after_the_last() -> None:
    cells = [cell("standing", 2, role="standing"), cell("ngram-k3", 2), cell("draft-k3", 2)]
    blocks = [Block(index=0, order=["ngram-k3", "standing", "draft-k3"]),
              Block(index=1, order=["draft-k3", "ngram-k3", "standing"])]
    run = FakeRun(cells)
    await run_interleaved(run, launches(cells), blocks)
    kinds = [entry[0] for entry in run.log]
    assert kinds[:4] == ["recheck", "start", "start", "start"]  # the node checked once: our own servers follow
    assert kinds[-3:] == ["stop", "stop", "stop"] and "stop" not in kinds[:-3]
    # Block by block in the plan's order, each cell's levels in order inside its turn.
    assert steps(run, "measure") == [
        ("ngram-k3", 0, 1), ("ngram-k3", 0, 4), ("standing", 0, 1), ("standing", 0, 4), ("draft-k3", 0, 1),
        ("draft-k3", 0, 4),
        ("draft-k3", 1, 1), ("draft-k3", 1, 4), ("ngram-k3", 1, 1), ("ngram-k3", 1, 4), ("standing", 1, 1),
        ("standing", 1, 4)]
    # Each block recorded once measured, the standing cell first (the candidates' agreement reads it).
    assert steps(run, "record") == [
        ("standing", 0, 1), ("standing", 0, 4), ("ngram-k3", 0, 1), ("ngram-k3", 0, 4), ("draft-k3", 0, 1),
        ("draft-k3", 0, 4),
        ("standing", 1, 1), ("standing", 1, 4), ("draft-k3", 1, 1), ("draft-k3", 1, 4), ("ngram-k3", 1, 1),
        ("ngram-k3", 1, 4)]
    assert run.failed == {}


async def test_a_cell_that_fails_its_start_is_skipped_and_the_others_run() -> None:
    cells = [cell("standing", 2, role="standing"), cell("ngram-k3", 2)]
    run = FakeRun(cells, fail={("start", "ngram-k3"): ServerNotReady("no /health within 300s")})
    await run_interleaved(run, launches(cells), block_order(RUN, cells))
    assert run.failed == {"ngram-k3": "no /health within 300s"}
    assert {entry[0] for entry in steps(run, "measure")} == {"standing"}
    assert steps(run, "stop") == [("standing",)]


async def test_a_rejected_cell_is_skipped_in_later_blocks_and_stopped_after_its_block() -> None:
    cells = [cell("standing", 3, role="standing"), cell("ngram-k3", 3)]
    blocks = [Block(index=b, order=["ngram-k3", "standing"]) for b in range(3)]
    run = FakeRun(cells, fail={("record", "ngram-k3", 0, 1): SpeculationNotActive("no drafts")})
    await run_interleaved(run, launches(cells), blocks)
    assert run.failed == {"ngram-k3": "no drafts"}
    # Its level 4 of block 0 was measured but, as in every regime, nothing after the rejected trial is recorded.
    assert [r for r in steps(run, "record") if r[0] == "ngram-k3"] == [("ngram-k3", 0, 1)]
    assert [m for m in steps(run, "measure") if m[0] == "ngram-k3"] == [("ngram-k3", 0, 1), ("ngram-k3", 0, 4)]
    assert [m[1] for m in steps(run, "measure") if m[0] == "standing"] == [0, 0, 1, 1, 2, 2]
    stop = run.log.index(("stop", "ngram-k3"))
    assert stop < run.log.index(("measure", "standing", 1, 1))  # stopped right after the block it failed in
    assert run.log[-1] == ("stop", "standing")


async def test_a_window_that_fails_keeps_what_its_cell_measured_before() -> None:
    cells = [cell("standing", 2, role="standing"), cell("ngram-k3", 2)]
    blocks = [Block(index=b, order=["standing", "ngram-k3"]) for b in range(2)]
    run = FakeRun(cells, fail={("measure", "ngram-k3", 0, 4): ServerNotReady("server died")})
    await run_interleaved(run, launches(cells), blocks)
    assert run.failed == {"ngram-k3": "server died"}
    assert [r for r in steps(run, "record") if r[0] == "ngram-k3"] == [("ngram-k3", 0, 1)]
    assert [m for m in steps(run, "measure") if m[0] == "ngram-k3"] == [("ngram-k3", 0, 1), ("ngram-k3", 0, 4)]


async def test_a_busy_node_fails_each_cell_before_any_server_starts() -> None:
    cells = [cell("standing", 2, role="standing"), cell("ngram-k3", 2)]
    run = FakeRun(cells, busy="busy with slurm job 7")
    await run_interleaved(run, launches(cells), block_order(RUN, cells))
    assert run.failed == {c.cell_id: "node n1 is not idle right before launch: busy with slurm job 7" for c in cells}
    # One check per node, before its servers start together; no server started.
    assert [entry[0] for entry in run.log] == ["recheck"]


async def test_adopted_trials_are_not_measured_again_and_a_cell_with_none_left_starts_no_server() -> None:
    cells = [cell("standing", 2, role="standing", concurrency=[1]), cell("ngram-k3", 2, concurrency=[1])]
    adopted = {("standing", 0, 1), ("standing", 1, 1), ("ngram-k3", 0, 1)}
    run = FakeRun(cells, adopted=adopted)
    await run_interleaved(run, launches(cells), block_order(RUN, cells))
    assert steps(run, "start") == [("ngram-k3", 1)]
    assert steps(run, "measure") == [("ngram-k3", 1, 1)]
    assert steps(run, "stop") == [("ngram-k3",)]


async def test_every_server_is_stopped_when_the_rotation_is_interrupted() -> None:
    cells = [cell("standing", 2, role="standing"), cell("ngram-k3", 2)]
    run = FakeRun(cells, fail={("measure", "standing", 0, 1): KeyboardInterrupt()})
    with pytest.raises(KeyboardInterrupt):
        await run_interleaved(run, launches(cells), [Block(index=0, order=["standing", "ngram-k3"])])
    assert sorted(steps(run, "stop")) == [("ngram-k3",), ("standing",)]


def test_the_regime_name_is_the_one_every_contract_knows() -> None:
    for model in (Cell, CellPlan, TrialIdentity):
        assert interleave.REGIME in get_args(model.model_fields["regime"].annotation)


def test_a_plan_read_back_without_its_blocks_is_refused() -> None:
    stored = orjson.loads(canonical_json(plan_for(INTERLEAVED)))
    del stored["blocks"]
    with pytest.raises(ValidationError, match="records `blocks` exactly when its cells are warm-interleaved"):
        BenchPlan.model_validate(stored)


async def test_servers_start_together_and_a_failed_start_fails_only_its_cell() -> None:
    cells = [cell("standing", 2, role="standing"), cell("ngram-k3", 2), cell("draft-k3", 2)]
    run = FakeRun(cells, fail={("start", "draft-k3"): ServerNotReady("no /health within 300 s")})
    await run_interleaved(run, launches(cells), block_order(RUN, cells))
    assert run.failed == {"draft-k3": "no /health within 300 s"}
    measured = {m[0] for m in steps(run, "measure")}
    assert measured == {"standing", "ngram-k3"}


def test_the_launch_order_is_shuffled_per_run_and_leaves_the_blocks_as_drawn_before() -> None:
    runs = [f"toy-20261130-040404-{i:06x}" for i in range(24)]
    plans = {run: plan_for(INTERLEAVED, run) for run in runs}
    # No arm is always the one started first (nor, with three cells, always last).
    assert {plan.launches[0].cell_id for plan in plans.values()} == {"standing", "ngram-k3", "draft-k3"}
    for run, plan in plans.items():
        assert [launch.cell_id for launch in plan.launches] == launch_order(run, plan.cells)
        assert plan_for(INTERLEAVED, run).launches == plan.launches  # planning the run again: the same order
        # The blocks are drawn from their own stream of the run's seed, as before launches were shuffled.
        assert plan.blocks == block_order(run, plan.cells)
    # Warm cells keep their written order: only the servers kept up together are shuffled.
    assert [launch.cell_id for launch in plan_for("warm").launches] == ["standing", "ngram-k3", "draft-k3"]
