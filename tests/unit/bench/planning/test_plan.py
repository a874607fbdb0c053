"""The bench plan's prompts and labels: every listed shape benched, the workload
shape derived from the prompt source (a contradicting label refused), and an
exploratory matrix planned as a DRAFT whatever its trial counts.

`plan_bench` runs against a real bundle folder (tmp_path); no process starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from pydantic import ValidationError

from contracts import layout
from contracts.campaign import Campaign, Matrix
from contracts.events import BenchRequested
from services.bench.errors import PromptError
from services.bench.planning.builder import build_plan, source_problems
from services.bench.planning.staging import plan_bench
from services.runtime.bundle.bundle import BundleStore
from services.runtime.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[4]
RUN = "toy-20261130-030303-abcdef"


def example() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())


def shapes_campaign(shapes: list[str], *, num_prompts: int = 7, **cell: Any) -> Campaign:
    data = example()
    # A checkpoint with no tokenizer anywhere: the plan then counts words (its documented fallback), whether or
    # not the e2e lane has built models/toy-target meanwhile.
    data["target"]["checkpoint"] = "models/no-tokenizer-here"
    data["traffic"] = {"shapes": shapes}
    data["commands"].pop("train")
    data["source_revisions"].pop("trainer")  # refused with shapes: nothing is trained
    data["matrix"]["load"]["num_prompts"] = num_prompts
    data["matrix"]["cells"] = [{"cell_id": "standing", "role": "standing", **cell},
                               {"cell_id": "ngram-k3", "role": "candidate",
                                "serving": {"speculative": {"method": "ngram", "num_speculative_tokens": 3}}}]
    return Campaign.model_validate(data)


def plan_of(campaign: Campaign, tmp_path: Path):
    bundle = BundleStore(tmp_path / "bundles")
    bundle.write_json(RUN, layout.CAMPAIGN, campaign)
    plan, _ = plan_bench(bundle, campaign, BenchRequested(run_id=RUN, producer="test", requested_by="test"))
    lines = bundle.read_bytes(RUN, layout.BENCH_PROMPTS).splitlines()
    return plan, [orjson.loads(line) for line in lines]


def test_every_listed_shape_is_benched_in_turn_and_the_plan_says_how(tmp_path):
    plan, prompts = plan_of(shapes_campaign(["short", "medium", "long"], num_prompts=7), tmp_path)
    # bench/prompts.jsonl: the shapes in turn, in the order listed (7 = 3 + 2 + 2).
    assert [p["prompt_id"] for p in prompts] == ["short-0", "medium-0", "long-0", "short-1", "medium-1", "long-1",
                                                 "short-2"]
    source = plan.prompts
    assert source["origin"] == "shapes" and source["workload_shape"] == "short+medium+long"
    assert source["count"] == 7 and source["uri"].endswith(layout.BENCH_PROMPTS)
    # Each shape as sent: its input within half the target's context (512 // 2), the output capped by the load.
    assert [(s["name"], s["prompts"], s["input_tokens"], s["output_tokens"], s["declared_input_tokens"])
            for s in source["shapes"]] == [("short", 3, 100, 64, 100), ("medium", 2, 256, 64, 1000),
                                           ("long", 2, 256, 64, 10000)]
    by_id = {p["prompt_id"]: p for p in prompts}
    assert len(by_id["short-0"]["text"].split()) == 100 and len(by_id["long-0"]["text"].split()) == 256
    # The label every trial's identity carries.
    assert {cell.identity["workload_shape"] for cell in plan.cells} == {"short+medium+long"}


def test_a_shape_listed_later_changes_what_is_sent(tmp_path):
    one, prompts_one = plan_of(shapes_campaign(["short"]), tmp_path / "a")
    two, prompts_two = plan_of(shapes_campaign(["short", "long"]), tmp_path / "b")
    assert {p["prompt_id"].rsplit("-", 1)[0] for p in prompts_one} == {"short"}
    assert {p["prompt_id"].rsplit("-", 1)[0] for p in prompts_two} == {"short", "long"}
    assert one.prompts["sha256"] != two.prompts["sha256"]


def test_fewer_prompts_than_shapes_is_refused(tmp_path):
    campaign = shapes_campaign(["short", "medium", "long"], num_prompts=2)
    assert source_problems(campaign, campaign.matrix) == [
        "matrix.load.num_prompts 2 is fewer than the 3 traffic.shapes ['short', 'medium', 'long']: every listed "
        "shape is benched with its share of the prompts; set num_prompts to 3 or more, or list fewer shapes"]
    with pytest.raises(PromptError, match="cannot cover 3 workload shapes"):
        plan_of(campaign, tmp_path)


def _plan(campaign: Campaign):
    assert isinstance(campaign.matrix, Matrix)
    return build_plan(campaign, campaign.matrix, run_id=RUN, default_node="n", training_output="/drafts/d",
                      prompts={"source": layout.BENCH_PROMPTS})


def test_the_workload_shape_is_derived_from_the_prompt_source():
    traffic = Campaign.model_validate(example())
    assert {cell.identity["workload_shape"] for cell in _plan(traffic).cells} == {"corpus-heldout"}
    # Unset on the cells: derived, the same for every cell.
    assert shapes_campaign(["medium"]).matrix.cells[0].workload_shape is None
    assert {c.identity["workload_shape"] for c in _plan(shapes_campaign(["medium"])).cells} == {"medium"}
    # A label that agrees with the source is accepted.
    assert _plan(shapes_campaign(["medium"], workload_shape="medium")).cells[0].identity["workload_shape"] == "medium"


@pytest.mark.parametrize(("shapes", "label", "says"), [
    (None, "long-context", "prompts come from traffic.path: the corpus's heldout split, which is 'corpus-heldout'"),
    (["short"], "corpus-heldout", "prompts come from traffic.shapes ['short'], which is 'short'"),
    (["short", "long"], "short", "which is 'short+long'"),
])
def test_a_label_that_contradicts_the_prompt_source_is_refused(shapes, label, says):
    if shapes is None:
        data = example()
        data["matrix"]["cells"][1]["workload_shape"] = label
        campaign = Campaign.model_validate(data)
        cell = "ngram-k3"
    else:
        campaign, cell = shapes_campaign(shapes, workload_shape=label), "standing"
    [problem] = source_problems(campaign, campaign.matrix)
    assert f"matrix.cells[{cell}].workload_shape is {label!r}" in problem and says in problem
    assert "remove workload_shape" in problem
    with pytest.raises(ConfigurationError, match=r"workload_shape is"):
        _plan(campaign)


def test_exploratory_marks_the_plan_draft_whatever_the_trial_counts():
    data = example()
    assert all(cell.get("trials", 3) >= 3 for cell in data["matrix"]["cells"])
    assert _plan(Campaign.model_validate(data)).draft is False
    data["matrix"]["exploratory"] = True
    assert _plan(Campaign.model_validate(data)).draft is True  # every cell has 3 trials
    for cell in data["matrix"]["cells"]:
        cell["trials"] = 2
    assert _plan(Campaign.model_validate(data)).draft is True
    data["matrix"]["exploratory"] = False
    with pytest.raises(ValidationError, match="set matrix.exploratory: true"):  # the matrix itself refuses it
        Campaign.model_validate(data)
