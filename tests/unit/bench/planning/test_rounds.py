"""Sequential rounds (gate.max_trials) in the bench plan and the bench-runner's round controller:
the cap is in the plan (and its hash), a fixed-trial plan is byte for byte as before, a matrix
that cannot run rounds is refused, and the rotation stops when every level is decided or at the
cap (windows faked, as in test_bench_run_interleaved.py)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import orjson
import pytest

from contracts import layout
from contracts.campaign import Campaign, Matrix
from services.bench import trial as trial_module
from services.bench.loadgen.loadgen import WindowSpec
from services.bench.loadgen.prompts import Prompt
from services.bench.loadgen.timing import RequestRecord
from services.bench.loadgen.window import MeasuredWindow
from services.bench.planning import rounds
from services.bench.planning.builder import build_plan, source_problems
from services.bench.planning.model import BenchPlan
from services.gate import stats
from services.gate.metrics import parse_metric
from services.runtime.bundle.bundle_records import canonical_json
from services.shared import sequential
from tests.unit.bench.planning.test_plan import example
from tests.unit.bench.test_run_interleaved import NO_COUNTERS, RUN, counters, wired  # noqa: F401


def campaign(max_trials: int | None = 6, *, regime: str = "warm-interleaved", trials: int | None = None,
             candidates: int = 1, **gate: Any) -> Campaign:
    data = example()
    # The draft cell stays: the example campaign trains it (a campaign training nothing drops commands.train).
    cells = [data["matrix"]["cells"][i] for i in ((0, 2) if candidates == 1 else (0, 1, 2))]
    for item in cells:
        item["regime"] = regime
        item.pop("trials", None)
        if trials is not None:
            item["trials"] = trials
    data["matrix"]["cells"] = cells
    if max_trials is not None:
        data["gate"]["max_trials"] = max_trials
    data["gate"].update(gate)
    return Campaign.model_validate(data)


def plan_of(c: Campaign, noise: dict | None = None) -> BenchPlan:
    assert isinstance(c.matrix, Matrix)
    return build_plan(c, c.matrix, run_id=RUN, default_node="n1", training_output="/drafts/d",
                      prompts={"source": layout.BENCH_PROMPTS}, noise=noise)


def sha(plan: BenchPlan) -> str:
    return hashlib.sha256(canonical_json(plan)).hexdigest()


def test_without_a_cap_the_plan_is_byte_for_byte_the_fixed_trial_plan():
    fixed = plan_of(campaign(None))
    data = orjson.loads(canonical_json(fixed))
    assert "rounds" not in data and "max_trials" not in data["cells"][0]
    assert fixed.cap is None and all(cell.trials == 3 for cell in fixed.cells)
    assert [b.index for b in fixed.blocks or []] == [0, 1, 2]
    assert "max_trials" not in campaign(None).gate.model_dump_json()


def test_the_cap_is_in_the_plan_and_its_hash_and_the_blocks_cover_it():
    plan = plan_of(campaign(6))
    assert plan.rounds is not None and plan.cap == 6 and plan.rounds.min_trials == 3
    assert all(cell.trials == 3 for cell in plan.cells), "the minimum every cell runs"
    assert [b.index for b in plan.blocks or []] == [0, 1, 2, 3, 4, 5]
    assert all(launch.trials == list(range(6)) for launch in plan.launches)
    assert sha(plan) != sha(plan_of(campaign(7))), "the approved hash names the ceiling"
    # The first three blocks are the fixed plan's: the rounds add blocks, they do not reshuffle the minimum.
    assert (plan.blocks or [])[:3] == plan_of(campaign(None)).blocks
    # No earlier noise: unknown until round 1, the pilot.
    assert [(n.concurrency, n.trials, n.expected_trials_per_arm) for n in plan.rounds.noise] == [
        (1, 0, None),
        (4, 0, None),
    ]


def test_earlier_noise_gives_the_expected_trials_per_arm():
    rng = np.random.default_rng(1)
    quiet = [list(np.exp(rng.normal(0, 0.02, 5)) * 10) for _ in range(4)]
    noisy = [list(np.exp(rng.normal(0, 0.2, 5)) * 10) for _ in range(4)]
    plan = plan_of(campaign(15, min_effect_pct=5.0), noise={1: (quiet, ["run-a"]), 4: (noisy, ["run-a", "run-b"])})
    assert plan.rounds is not None
    low, high = plan.rounds.noise
    assert low.trials == 20 and low.runs == ["run-a"] and 0.5 < (low.cv_pct or 0) < 4
    assert low.expected_trials_per_arm is not None and low.expected_trials_per_arm <= 5
    assert high.expected_trials_per_arm is None, "a 20 % spread does not resolve 5 % within 15 trials"


def test_a_matrix_that_cannot_run_rounds_is_refused_naming_why():
    warm = campaign(6, regime="warm")
    assert isinstance(warm.matrix, Matrix)
    assert any("are not warm-interleaved" in p for p in source_problems(warm, warm.matrix))
    other = campaign(6, trials=4)
    assert isinstance(other.matrix, Matrix)
    assert any("set other trials" in p for p in source_problems(other, other.matrix))
    with pytest.raises(ValueError, match="gate.max_trials 2 is below gate.min_trials 3"):
        campaign(2)
    fixed = campaign(None, regime="warm", trials=4)
    assert isinstance(fixed.matrix, Matrix) and source_problems(fixed, fixed.matrix) == []


def test_the_controller_reads_metrics_and_alpha_as_the_gate_does():
    assert sequential.CONFIDENCE == stats.CONFIDENCE
    for text in ("tpot", "tpot:p99", "ttft:p99.0", "itl:mean", "output_throughput", "acceptance_rate"):
        assert rounds.metric_key(text) == parse_metric(text, what="objective")
    assert plan_of(campaign(6, candidates=2)).rounds.alpha_per_side == pytest.approx(0.05 / 2 / 2)


# --- the rotation under the round controller ---------------------------------------------------

@pytest.fixture
def timed(wired, monkeypatch):  # noqa: F811
    """The wired BenchRun with windows whose TPOT is `tpot[cell](trial)` seconds."""
    make, executor, events, bundle = wired
    tpot: dict[str, Any] = {}

    async def window(spec: WindowSpec, prompts: list[Prompt], *, run_id: str) -> MeasuredWindow:
        cell_id = executor.cells[spec.base_url]
        executor.log.append(("window", cell_id, spec.seed, spec.max_concurrency))
        t = tpot[cell_id](spec.seed)
        requests = [RequestRecord(index=i, prompt_id=p.prompt_id, scheduled_s=0.0, start_s=0.0, end_s=0.2 + 2 * t,
                                  chunk_arrival_s=[0.2, 0.2 + 2 * t], chunk_tokens=[1, 2], output_tokens=3,
                                  prompt_tokens=3, status_code=200, error_kind=None, error=None,
                                  finish_reason="length", text=f"answer to {p.prompt_id}")
                    for i, p in enumerate(prompts)]
        speculates = cell_id != "standing"
        return MeasuredWindow(spec=spec, duration_s=1.0, requests=requests, warmup_completed=spec.warmup_requests,
                              warmup_failed=0, max_in_flight=1,
                              metrics_before=counters(0) if speculates else NO_COUNTERS,
                              metrics_after=counters(4) if speculates else NO_COUNTERS, metrics_error=None)

    monkeypatch.setattr(trial_module, "run_window_process", window)
    return make, executor, bundle, tpot


def trials_run(executor: Any, cell: str) -> int:
    return len({entry[2] for entry in executor.log if entry[0] == "window" and entry[1] == cell})


async def test_the_rounds_stop_at_the_first_look_when_every_level_is_decided(timed):
    make, executor, bundle, tpot = timed
    wobble = [1.0, 1.03, 0.98, 1.01, 0.99, 1.02]
    tpot.update({"standing": lambda t: 0.040 * wobble[t], "draft-k3": lambda t: 0.020 * wobble[(t + 2) % 6]})
    plan = plan_of(campaign(6))
    outcome = await make(plan).execute()
    assert outcome.failed_cells == {}
    assert trials_run(executor, "standing") == trials_run(executor, "draft-k3") == 3, "stopped at the minimum"
    assert len(outcome.results) == 2 * 3 * 2
    look = bundle.read_json(RUN, rounds.look_path(3))
    assert look["stopped"] == "decided" and {lvl["verdict"] for lvl in look["levels"]} == {"better"}
    assert not (bundle.run_dir(RUN) / rounds.look_path(4)).exists()
    # The arm's largest trial_count is the trials it ran: the gate finds none missing.
    result = orjson.loads(bundle.read_bytes(RUN, layout.trial_result("draft-k3", 2, 4)))
    assert result["identity"]["trial_count"] == 3


async def test_the_rounds_go_on_while_a_level_is_open_and_stop_at_the_cap(timed):
    make, executor, bundle, tpot = timed
    wobble = [1.0, 1.15, 0.88, 1.1, 0.9, 1.12]  # ~10 % per-trial noise, no change: undecided through 5 trials
    tpot.update({"standing": lambda t: 0.040 * wobble[t], "draft-k3": lambda t: 0.040 * wobble[(t + 3) % 6]})
    outcome = await make(plan_of(campaign(5))).execute()
    assert trials_run(executor, "standing") == trials_run(executor, "draft-k3") == 5
    assert [look["trials_per_arm"] for look in outcome.rounds] == [3, 4, 5]
    assert [look["stopped"] for look in outcome.rounds] == [None, None, "cap"]
    assert all(lvl["open"] and lvl["verdict"] == "undecided" for lvl in outcome.rounds[-1]["levels"])
    result = orjson.loads(bundle.read_bytes(RUN, layout.trial_result("standing", 4, 1)))
    assert result["identity"]["trial_count"] == 5 and result["identity"]["trial"] == 4


async def test_a_level_decided_later_stops_the_rounds_before_the_cap(timed):
    make, executor, bundle, tpot = timed
    wobble = [1.0, 1.2, 0.85, 1.05, 0.97, 1.02, 0.99, 1.01]
    tpot.update({"standing": lambda t: 0.040 * wobble[t], "draft-k3": lambda t: 0.030 * wobble[(t + 1) % 8]})
    outcome = await make(plan_of(campaign(8))).execute()
    stops = [look["stopped"] for look in outcome.rounds]
    assert stops[-1] == "decided" and 3 < outcome.rounds[-1]["trials_per_arm"] < 8, stops
    assert trials_run(executor, "draft-k3") == outcome.rounds[-1]["trials_per_arm"]
