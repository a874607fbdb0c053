"""The draft-cost timing: interleaving, warm-up and medians with a scripted clock and fake
models; then the real measurement on tiny checkpoints, and one that cannot run."""

from __future__ import annotations

import math

import pytest

from contracts import layout
from contracts.artifacts.training import DraftCost
from services.runtime.bundle.bundle import BundleStore
from services.trainer_proxy.checks.draft_cost import CostNotMeasured, measure, record, summarize, time_interleaved
from tests.unit.trainer_proxy.helpers import build_tiny_models

PROMPTS = [[{"role": "user", "content": "hello world, the quick brown fox"}], [{"role": "user", "content": "lazy dog"}]]


class ScriptedClock:
    """A clock that only moves when a fake model runs, by that model's next scripted duration."""

    def __init__(self) -> None:
        self.now = 100.0
        self.calls: list[str] = []

    def __call__(self) -> float:
        return self.now

    def model(self, name: str, durations: list[float]):
        script = iter(durations)

        def forward() -> None:
            self.calls.append(name)
            self.now += next(script)

        return forward


def test_the_warm_up_is_untimed_and_the_timed_forwards_interleave():
    clock = ScriptedClock()
    # The first duration of each is its warm-up: far slower, and it must not show.
    draft = clock.model("draft", [900.0, 0.003, 0.001, 0.002, 0.005, 0.004])
    target = clock.model("target", [900.0, 0.010, 0.030, 0.020, 0.050, 0.040])
    draft_s, target_s = time_interleaved(draft, target, repetitions=5, clock=clock)
    assert clock.calls == ["draft", "target"] + ["draft", "target"] * 5
    assert draft_s == pytest.approx([0.003, 0.001, 0.002, 0.005, 0.004])
    assert target_s == pytest.approx([0.010, 0.030, 0.020, 0.050, 0.040])


def test_the_record_holds_medians_per_token_and_their_ratio():
    cost = summarize(
        "run-1", [0.003, 0.001, 0.002, 0.005, 0.004], [0.010, 0.030, 0.020, 0.050, 0.040], prompts=8, tokens=500,
        threads=2, dtype="float32", draft_parameters=10, target_parameters=135,
    )
    assert cost.draft_ms_per_token == pytest.approx(3.0 / 500)
    assert cost.target_ms_per_token == pytest.approx(30.0 / 500)
    assert cost.relative_cost == cost.draft_ms_per_token / cost.target_ms_per_token
    assert cost.relative_cost == pytest.approx(0.1)
    assert (cost.repetitions, cost.batch_prompts, cost.batch_tokens, cost.threads) == (5, 8, 500, 2)
    # Written and read back, the ratio still equals the two recorded fields' quotient exactly.
    again = DraftCost.model_validate_json(cost.model_dump_json())
    assert again.relative_cost == again.draft_ms_per_token / again.target_ms_per_token


def test_a_forward_that_takes_no_measurable_time_is_not_a_cost():
    with pytest.raises(CostNotMeasured, match="no measurable time"):
        summarize("run-1", [0.0, 0.0, 0.0], [0.01, 0.01, 0.01], prompts=1, tokens=10, threads=1, dtype="float32",
                  draft_parameters=1, target_parameters=1)
    with pytest.raises(CostNotMeasured, match="unequal"):
        summarize("run-1", [0.01], [0.01, 0.02], prompts=1, tokens=10, threads=1, dtype="float32",
                  draft_parameters=1, target_parameters=1)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_tiny_models(tmp_path_factory.mktemp("tiny"))


def test_tiny_checkpoints_are_timed_on_one_batch(models):
    cost = measure("run-1", models["draft"], target=models["target"], tokenizer=models["target"], prompts=PROMPTS,
                   repetitions=3)
    assert cost.batch_prompts == 2 and cost.batch_tokens > 2 and cost.repetitions == 3
    assert cost.dtype == "float32" and cost.threads >= 1
    assert cost.draft_ms_per_token > 0 and cost.target_ms_per_token > 0
    assert cost.relative_cost == cost.draft_ms_per_token / cost.target_ms_per_token
    assert cost.draft_parameters == cost.target_parameters > 0  # the tiny draft is the target's shape


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict]] = []

    def info(self, event: str, **kw) -> None:
        self.lines.append(("info", event, kw))

    def warning(self, event: str, **kw) -> None:
        self.lines.append(("warning", event, kw))


def _seed(tmp_path) -> BundleStore:
    bundle = BundleStore(tmp_path / "bundles")
    bundle.create_run("run-1")
    bundle.write_bytes("run-1", layout.TRAINING_CORPUS_HELDOUT,
                       b'{"messages": [{"role": "user", "content": "the quick brown fox"}]}\n')
    return bundle


async def test_the_file_is_written_once_and_a_target_that_does_not_load_writes_none(models, tmp_path):
    bundle, log = _seed(tmp_path), Log()
    cost = await record(bundle, "run-1", models["draft"], target=models["target"], tokenizer=models["target"], log=log)
    assert cost is not None and cost.batch_prompts == 1
    assert DraftCost.model_validate(bundle.read_json("run-1", layout.TRAINING_DRAFT_COST)) == cost
    assert log.lines[-1][:2] == ("info", "draft cost measured") and math.isfinite(log.lines[-1][2]["relative_cost"])
    # A redelivery keeps the first measurement rather than timing again.
    again = await record(bundle, "run-1", models["draft"], target=tmp_path / "gone", tokenizer=models["target"],
                         log=log)
    assert again == cost

    other = BundleStore(tmp_path / "other")
    other.create_run("run-1")
    other.write_bytes("run-1", layout.TRAINING_CORPUS_HELDOUT, b"")
    log = Log()
    missing = tmp_path / "no-target"
    assert await record(other, "run-1", models["draft"], target=missing, tokenizer=models["target"], log=log) is None
    assert not (other.run_dir("run-1") / layout.TRAINING_DRAFT_COST).exists()
    level, event, kw = log.lines[-1]
    assert (level, event) == ("warning", "draft cost not measured") and str(missing) in kw["reason"]
