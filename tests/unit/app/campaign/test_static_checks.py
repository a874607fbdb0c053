"""Every refusal of the bench planner's static checks is already `specdec validate`'s.

The planner refuses a matrix that cannot give a controlled comparison; each of those
checks needs only the campaign and local files, so `validate` and `submit` make it
too, before profile, corpus, capacity and training run (docs/configuration.md,
"Checked before anything runs"). Each scenario plants one such problem in the example
campaign and expects the planner and `validate` to name it alike.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from contracts.campaign import Campaign, Matrix
from services.app.campaign.validate import validate
from services.bench.planning.builder import build_plan
from services.runtime.errors import ConfigurationError
from services.shared import campaign_checks

ROOT = Path(__file__).resolve().parents[4]
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4}


def example() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())


def _trials(data: dict[str, Any]) -> None:
    data["matrix"]["cells"][0]["trials"] = 1


def _graph_mode(data: dict[str, Any]) -> None:
    data["matrix"]["cells"][1]["serving"]["graph_mode"] = "graph"


def _nodes(data: dict[str, Any]) -> None:
    data["matrix"]["cells"][0]["node"] = "node-a"
    data["matrix"]["cells"][1]["node"] = "node-b"


def _standing(data: dict[str, Any]) -> None:
    data["standing"] = NGRAM  # the standing cell serves no speculation


def _workload_shape(data: dict[str, Any]) -> None:
    data["matrix"]["cells"][0]["workload_shape"] = "chat"


def _rounds_regime(data: dict[str, Any]) -> None:
    data["gate"]["max_trials"] = 6


def _rounds_trials(data: dict[str, Any]) -> None:
    data["gate"]["max_trials"] = 6
    for cell in data["matrix"]["cells"]:
        cell["regime"] = "warm-interleaved"
    data["matrix"]["cells"][1]["trials"] = 5


def _shapes_prompts(data: dict[str, Any]) -> None:
    data["traffic"] = {"shapes": ["short", "medium", "long"]}
    data["commands"].pop("train")
    data["source_revisions"].pop("trainer")
    data["matrix"]["cells"].pop()  # the trained draft: a shapes campaign trains nothing
    data["matrix"]["load"]["num_prompts"] = 2


def _template(data: dict[str, Any]) -> None:
    # An operator serve command that drops the cell's speculative config.
    data["matrix"]["cells"][1]["vllm_sweep"] = {
        "serve_cmd": ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "{model}", "--port", "{port}"]}


# scenario -> (plant it, what both the planner and validate name, the check of
# services/shared/campaign_checks.py that names it; None: the matrix model's own)
SCENARIOS: dict[str, tuple[Callable[[dict[str, Any]], None], str, str | None]] = {
    "trials": (_trials, "fewer than 3 trials", None),
    "graph_mode": (_graph_mode, "differ in graph mode", None),
    "nodes": (_nodes, "differ in node", None),
    "standing": (_standing, "the standing cell standing serves None", "standing_problems"),
    "workload_shape": (_workload_shape, "workload_shape is 'chat'", "workload_shape_problems"),
    "rounds_regime": (_rounds_regime, "are not warm-interleaved", "round_problems"),
    "rounds_trials": (_rounds_trials, "set other trials", "round_problems"),
    "shapes_prompts": (_shapes_prompts, "fewer than the 3 traffic.shapes", "prompt_count_problems"),
    "template": (_template, "carries neither {speculative_config_json}", "operator_template_problems"),
}


def planner_refusal(data: dict[str, Any]) -> str:
    """What the bench planner says of the campaign (its model, then its plan); empty when it plans it."""
    try:
        campaign = Campaign.model_validate(data)
        assert isinstance(campaign.matrix, Matrix), "the scenarios' matrices are inline"
        build_plan(campaign, campaign.matrix, run_id="toy-20261203-000000-abcdef", default_node="node-a",
                   training_output="/drafts/d", prompts={})
    except (ValidationError, ConfigurationError) as exc:
        return str(exc)
    return ""


def test_the_scenarios_plant_a_problem_for_every_static_check_of_the_planner():
    # A check added to the planner's static checks without a scenario here fails this test.
    assert {check.__name__ for check in campaign_checks.CHECKS} == {c for _, _, c in SCENARIOS.values() if c}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_planner_refusal_is_named_by_validate(name, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the example's relative paths (traffic) resolve from the repository
    plant, needle = SCENARIOS[name][:2]
    data = example()
    plant(data)
    assert needle in planner_refusal(data), planner_refusal(data)
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(data))
    result = validate(path)
    assert not result.accepted
    assert any(needle in problem for problem in result.problems), result.problems


def test_the_example_campaign_is_planned_and_accepted(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert planner_refusal(example()) == ""
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(example()))
    assert validate(path).problems == []
