"""BenchRun (services/bench/run.py) executing a warm-interleaved plan through a fake executor:
every server up before the first window, the windows in the plan's blocks, every result
written with its agreement and the load generator's CPU use, a resumed run measuring only
what is missing. The window's process and the engine read-back are replaced (no vLLM here);
the window's own protections are tested in tests/unit/bench/loadgen/test_window_cpu.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contracts import layout
from contracts.artifacts.results import LOADGEN_CPU_KEY, LoadgenCpu
from contracts.campaign import Campaign, Matrix
from services.bench import run as run_module
from services.bench import trial as trial_module
from services.bench.loadgen.loadgen import WindowSpec
from services.bench.loadgen.prompts import ChatTurn, Prompt
from services.bench.loadgen.timing import RequestRecord
from services.bench.loadgen.window import MeasuredWindow
from services.bench.planning.builder import build_plan
from services.bench.planning.model import BenchPlan, Block
from services.bench.run import BenchRun
from services.runtime.bundle.bundle import BundleStore
from tests.unit.bench.planning.test_plan import example

RUN = "toy-20261130-040404-abcdef"
K = 3
PROMPTS = [Prompt(prompt_id=f"p{i}", messages=[ChatTurn(role="user", content=f"q{i}")], text=f"q{i}",
                  input_tokens=3, max_output_tokens=9, ignore_eos=True) for i in range(3)]


def counters(drafts: int) -> str:
    lines = [f'vllm:spec_decode_num_drafts_total{{engine="0"}} {float(drafts)}',
             f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {float(drafts * K)}',
             f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {float(drafts)}']
    # Every draft accepts its first token only.
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="{p}"}} {float(drafts * (p == 0))}'
        for p in range(K)
    ]
    return "\n".join(lines) + "\n"


NO_COUNTERS = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0.0\n"


def interleaved_plan(trials: dict[str, int] | None = None) -> BenchPlan:
    data = example()
    for item in data["matrix"]["cells"]:
        item["regime"] = "warm-interleaved"
        item["trials"] = (trials or {}).get(item["cell_id"], 3)
    campaign = Campaign.model_validate(data)
    assert isinstance(campaign.matrix, Matrix)
    return build_plan(campaign, campaign.matrix, run_id=RUN, default_node="n1", training_output="/drafts/d",
                      prompts={"source": layout.BENCH_PROMPTS})


class FakeServed:
    def __init__(self, log: list[Any], cell_id: str, index: int) -> None:
        self.log, self.cell_id = log, cell_id
        self.base_url = f"http://127.0.0.1:{9100 + index}"
        self.files: list[str] = []

    def record(self) -> dict[str, Any]:
        return {"fake": self.cell_id}

    async def wait_ready(self, timeout_s: float) -> float:
        return 0.5

    async def log_text(self) -> str:
        return ""

    async def stop(self) -> None:
        self.log.append(("stop", self.cell_id))


class FakeExecutor:
    def __init__(self) -> None:
        self.log: list[Any] = []
        self.cells: dict[str, str] = {}  # base_url -> the cell served there

    async def prepare(self) -> list[str]:
        return []

    async def start(self, index: int, step: Any, cell: Any, folder: str) -> FakeServed:
        self.log.append(("start", cell.cell_id, folder))
        served = FakeServed(self.log, cell.cell_id, index)
        self.cells[served.base_url] = cell.cell_id
        return served

    async def cleanup(self) -> list[str]:
        self.log.append(("cleanup",))
        return []


@pytest.fixture
def wired(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A BenchRun factory over a fake executor; windows answer every prompt with one text per prompt."""
    executor = FakeExecutor()
    events: list[dict[str, Any]] = []
    interrupt: list[int] = []  # set: the window of that number (from 0) dies with the runner

    async def no_read_back(self: BenchRun, *args: Any, **kwargs: Any) -> None:
        return None

    async def window(spec: WindowSpec, prompts: list[Prompt], *, run_id: str) -> MeasuredWindow:
        cell_id = executor.cells[spec.base_url]
        if interrupt and len([e for e in executor.log if e[0] == "window"]) == interrupt[0]:
            raise RuntimeError("the bench-runner was killed")
        executor.log.append(("window", cell_id, spec.seed, spec.max_concurrency))
        speculates = cell_id != "standing"
        requests = [RequestRecord(index=i, prompt_id=p.prompt_id, scheduled_s=0.0, start_s=0.0, end_s=1.0,
                                  chunk_arrival_s=[0.2, 0.4], chunk_tokens=[1, 2], output_tokens=3, prompt_tokens=3,
                                  status_code=200, error_kind=None, error=None, finish_reason="length",
                                  text=f"answer to {p.prompt_id}") for i, p in enumerate(prompts)]
        return MeasuredWindow(spec=spec, duration_s=1.0, requests=requests, warmup_completed=spec.warmup_requests,
                              warmup_failed=0, max_in_flight=1,
                              metrics_before=counters(0) if speculates else NO_COUNTERS,
                              metrics_after=counters(4) if speculates else NO_COUNTERS, metrics_error=None,
                              loadgen_cpu=LoadgenCpu(user_s=0.25, sys_s=0.05, wall_s=1.5, cpus=[1]))

    monkeypatch.setattr(run_module.BenchRun, "_read_back", no_read_back)
    monkeypatch.setattr(trial_module, "run_window_process", window)
    bundle = BundleStore(tmp_path / "bundles", fsync=False)

    async def emit(event: Any) -> None:
        events.append(event)

    async def idle(node: str) -> None:
        executor.log.append(("recheck", node))
        return None

    def make(plan: BenchPlan) -> BenchRun:
        return BenchRun(plan, bundle, PROMPTS, emit=emit, recheck=idle, event_factory=lambda **fields: fields,  # type: ignore[arg-type]  # the fields, read back
                        executor=executor, max_model_len=512)

    make.interrupt = interrupt  # type: ignore[attr-defined]  # the fixture's hook, on the function
    return make, executor, events, bundle


async def test_the_plans_blocks_run_on_servers_kept_up_and_every_result_is_written(wired) -> None:
    make, executor, events, bundle = wired
    plan = interleaved_plan()
    plan = plan.model_copy(update={"blocks": [Block(index=b, order=["draft-k3", "ngram-k3", "standing"])
                                              for b in range(3)]})
    outcome = await make(plan).execute()
    assert outcome.failed_cells == {}
    kinds = [entry[0] for entry in executor.log]
    assert kinds[:4] == ["recheck", "start", "start", "start"]
    # Started in the plan's launch order (shuffled per run: interleave.launch_order).
    launched = [launch.cell_id for launch in plan.launches]
    assert sorted(launched) == ["draft-k3", "ngram-k3", "standing"]
    assert [entry[1] for entry in executor.log if entry[0] == "start"] == launched
    assert [e[2] for e in executor.log if e[0] == "start"] == [layout.launch_folder(c, i) for i, c in
                                                                enumerate(launched)]
    assert kinds[-4:] == ["stop", "stop", "stop", "cleanup"] and "stop" not in kinds[:-4]
    # The plan's block order, trial b in block b, each cell's levels in order.
    windows = [entry[1:] for entry in executor.log if entry[0] == "window"]
    assert windows == [
        (c, b, level) for b in range(3) for c in ("draft-k3", "ngram-k3", "standing") for level in (1, 4)
    ]
    # Every trial's result is written and its event emitted; recorded standing first in each block.
    assert len(outcome.results) == 18 and len(events) == 18
    assert [(e["cell_id"], e["trial"]) for e in events[:6:2]] == [("standing", 0), ("draft-k3", 0), ("ngram-k3", 0)]
    for cell_id in ("ngram-k3", "draft-k3"):
        for trial in range(3):
            result = json.loads(bundle.read_bytes(RUN, layout.trial_result(cell_id, trial, 4)))
            # Measured before the standing cell in its block, and still compared with its outputs.
            assert result["evaluation"] == {"accuracy": None, "agreement_rate": 1.0, "samples": 3}
            assert result["identity"]["regime"] == "warm-interleaved"
            assert result[LOADGEN_CPU_KEY] == {"user_s": 0.25, "sys_s": 0.05, "wall_s": 1.5, "cpus": [1]}


async def test_a_resumed_interleaved_run_measures_only_the_missing_trials(wired) -> None:
    make, executor, events, bundle = wired
    plan = interleaved_plan()
    make.interrupt.append(8)  # block 1's third window: block 0 is recorded, block 1 is not
    with pytest.raises(RuntimeError, match="killed"):
        await make(plan).execute()
    assert len(events) == 6 and {e["trial"] for e in events} == {0}
    assert [entry[0] for entry in executor.log][-4:] == ["stop", "stop", "stop", "cleanup"]
    make.interrupt.clear()
    executor.log.clear()
    outcome = await make(plan).execute()
    assert outcome.failed_cells == {} and len(outcome.results) == 18
    windows = [entry[1:] for entry in executor.log if entry[0] == "window"]
    assert {w[1] for w in windows} == {1, 2} and len(windows) == 12  # block 0 adopted, not measured again
    # Block 0's events are emitted again (its trials adopted), same event IDs: 18 events in all.
    assert len(events) == 24 and len({e["event_id"] for e in events}) == 18
    # The second attempt's launch files go beside the first's.
    assert [e[2] for e in executor.log if e[0] == "start"] == [
        layout.attempt_folder(layout.launch_folder(launch.cell_id, i), 2) for i, launch in enumerate(plan.launches)]


async def test_a_cell_whose_speculation_is_not_active_fails_and_is_skipped_in_later_blocks(wired, monkeypatch) -> None:
    make, executor, events, bundle = wired
    measured = trial_module.run_window_process

    async def no_drafts_for_ngram(spec: WindowSpec, prompts: list[Prompt], *, run_id: str) -> MeasuredWindow:
        window = await measured(spec, prompts, run_id=run_id)
        if executor.log[-1][1] == "ngram-k3":
            window = window.model_copy(update={"metrics_after": counters(0)})
        return window

    monkeypatch.setattr(trial_module, "run_window_process", no_drafts_for_ngram)
    outcome = await make(interleaved_plan()).execute()
    assert set(outcome.failed_cells) == {"ngram-k3"}
    assert "no drafts during the measured window" in outcome.failed_cells["ngram-k3"]
    windows = [entry[1:] for entry in executor.log if entry[0] == "window"]
    assert {w[1] for w in windows if w[0] == "ngram-k3"} == {0}  # never measured after block 0
    assert {(w[1], w[2]) for w in windows if w[0] == "standing"} == {(b, c) for b in range(3) for c in (1, 4)}
    assert bundle.run_dir(RUN).joinpath(layout.rejected_result("ngram-k3", 0, 1)).exists()


def _read_in_bursts(window: MeasuredWindow) -> MeasuredWindow:
    """The window with every request's 5 chunks read at one instant (services/bench/executors/stall.py)."""
    requests = [r.model_copy(update={"chunk_arrival_s": [0.9] * 5, "chunk_tokens": [1] * 5, "output_tokens": 5})
                for r in window.requests]
    return window.model_copy(update={"requests": requests})


async def test_a_window_read_in_bursts_is_kept_and_measured_again(wired, monkeypatch) -> None:
    make, executor, events, bundle = wired
    measured = trial_module.run_window_process
    stalled: list[tuple[str, int, int]] = []

    async def ngram_stalls_once(spec: WindowSpec, prompts: list[Prompt], *, run_id: str) -> MeasuredWindow:
        window = await measured(spec, prompts, run_id=run_id)
        key = (executor.log[-1][1], spec.seed, spec.max_concurrency)
        if key == ("ngram-k3", 1, 4) and key not in stalled:
            stalled.append(key)
            return _read_in_bursts(window)
        return window

    monkeypatch.setattr(trial_module, "run_window_process", ngram_stalls_once)
    outcome = await make(interleaved_plan()).execute()
    assert outcome.failed_cells == {}
    windows = [entry[1:] for entry in executor.log if entry[0] == "window"]
    assert windows.count(("ngram-k3", 1, 4)) == 2 and windows.count(("ngram-k3", 0, 4)) == 1
    raw = layout.attempt_folder(layout.trial_folder("ngram-k3", 1), 1)
    kept = bundle.run_dir(RUN) / raw / "stalled-window-c4-1.json"
    assert (
        kept.is_file()
        and MeasuredWindow.model_validate_json(kept.read_bytes()).requests[0].chunk_arrival_s == [0.9] * 5
    )
    assert bundle.run_dir(RUN).joinpath(layout.trial_result("ngram-k3", 1, 4)).exists()


async def test_a_cell_whose_client_keeps_reading_in_bursts_fails_naming_why(wired, monkeypatch) -> None:
    make, executor, events, bundle = wired
    measured = trial_module.run_window_process

    async def ngram_always_stalls(spec: WindowSpec, prompts: list[Prompt], *, run_id: str) -> MeasuredWindow:
        window = await measured(spec, prompts, run_id=run_id)
        return _read_in_bursts(window) if executor.log[-1][1] == "ngram-k3" else window

    monkeypatch.setattr(trial_module, "run_window_process", ngram_always_stalls)
    outcome = await make(interleaved_plan()).execute()
    assert set(outcome.failed_cells) == {"ngram-k3"}
    assert f"{trial_module.STALL_ATTEMPTS} windows in a row were read in bursts" in outcome.failed_cells["ngram-k3"]
    assert "time the client, not the server" in outcome.failed_cells["ngram-k3"]
    windows = [entry[1:] for entry in executor.log if entry[0] == "window"]
    assert windows.count(("ngram-k3", 0, 1)) == trial_module.STALL_ATTEMPTS
    assert not bundle.run_dir(RUN).joinpath(layout.trial_result("ngram-k3", 0, 1)).exists()



def _unrecord(bundle: BundleStore, relpath: str) -> None:
    """What a kill between a result's file and its index record leaves: the file, no record."""
    from services.runtime.bundle.bundle_records import index_name

    (bundle.run_dir(RUN) / ".index" / index_name(relpath)).unlink()
    assert (bundle.run_dir(RUN) / relpath).is_file()


async def test_a_result_file_left_without_its_record_is_adopted_not_measured_again(wired) -> None:
    make, executor, events, bundle = wired
    plan = interleaved_plan()
    first = await make(plan).execute()
    orphan = layout.trial_result("draft-k3", 1, 4)
    durable = bundle.read_bytes(RUN, orphan)
    _unrecord(bundle, orphan)
    executor.log.clear()
    outcome = await make(plan).execute()
    assert outcome.failed_cells == {}, "the retry's cell does not fail over its own earlier measurement"
    assert [e for e in executor.log if e[0] == "window"] == [], "nothing measured again"
    assert sorted(r.uri for r in outcome.results) == sorted(r.uri for r in first.results)
    assert bundle.read_bytes(RUN, orphan) == durable, "the first, durable measurement counts"


async def test_a_result_recorded_meanwhile_wins_and_the_new_measurement_is_kept_aside(wired, monkeypatch) -> None:
    make, executor, events, bundle = wired
    measured = trial_module.run_window_process
    target = layout.trial_result("ngram-k3", 2, 1)

    async def recorded_meanwhile(spec: WindowSpec, prompts: list[Prompt], *, run_id: str) -> MeasuredWindow:
        window = await measured(spec, prompts, run_id=run_id)
        if (executor.log[-1][1], spec.seed, spec.max_concurrency) == ("ngram-k3", 2, 1):
            # Another attempt's measurement became durable while this one ran (a retry that found
            # no record when it looked): its bytes differ from what this window gives.
            bundle.write_bytes(RUN, target, b'{"completed": 3, "failed": 0, "earlier": true}')
        return window

    monkeypatch.setattr(trial_module, "run_window_process", recorded_meanwhile)
    outcome = await make(interleaved_plan()).execute()
    assert outcome.failed_cells == {}
    assert json.loads(bundle.read_bytes(RUN, target))["earlier"] is True, "the durable one counts"
    assert bundle.ref(RUN, target) in outcome.results
    aside = layout.attempt_folder(layout.trial_folder("ngram-k3", 2), 1) + "/remeasured-" + layout.result_name(1)
    kept = json.loads(bundle.read_bytes(RUN, aside))
    assert kept["identity"]["cell_id"] == "ngram-k3" and "earlier" not in kept, "the other is recorded aside"


async def test_a_trial_adopted_by_a_retry_emits_its_event_again_with_the_same_id(wired) -> None:
    make, executor, events, bundle = wired
    plan = interleaved_plan()
    await make(plan).execute()
    first = {(e["cell_id"], e["trial"], e["concurrency"]): e["event_id"] for e in events}
    assert len(first) == len(set(first.values())) == 18
    # The retry of a step whose events a kill or a long Redis outage lost: every trial is adopted.
    events.clear()
    executor.log.clear()
    outcome = await make(plan).execute()
    assert outcome.failed_cells == {} and [e for e in executor.log if e[0] == "window"] == []
    assert {(e["cell_id"], e["trial"], e["concurrency"]): e["event_id"] for e in events} == first
