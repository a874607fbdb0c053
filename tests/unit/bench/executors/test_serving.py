"""Serving config -> vLLM argv (the counters' verdict is contracts.artifacts.speculation:
tests/unit/contracts/artifacts/test_speculation.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from contracts.campaign import Campaign, ServingConfig
from services.bench.executors.serving import SERVING_ARGS, serve_argv, speculative_config
from services.runtime.errors import ConfigurationError

EXAMPLE = Path(__file__).resolve().parents[4] / "infra/examples/campaign.yaml"


@pytest.fixture
def campaign() -> Campaign:
    return Campaign.model_validate(yaml.safe_load(EXAMPLE.read_text()))


def cell(campaign: Campaign, cell_id: str):
    return next(c for c in campaign.matrix.cells if c.cell_id == cell_id)  # type: ignore[union-attr]  # an inline matrix


def test_every_serving_field_is_mapped():
    assert set(SERVING_ARGS) == set(ServingConfig.model_fields)


def test_standing_cell_argv(campaign):
    argv = serve_argv(cell(campaign, "standing"), campaign, host="127.0.0.1", port=8123, python="py")
    assert argv[:3] == ["py", "-m", "vllm.entrypoints.openai.api_server"]
    assert argv[argv.index("--model") + 1] == "models/toy-target"
    assert argv[argv.index("--max-model-len") + 1] == "512"
    assert "--enforce-eager" in argv and "--speculative-config" not in argv
    assert argv[argv.index("--port") + 1] == "8123"


def test_ngram_cell_carries_its_speculative_config(campaign):
    argv = serve_argv(cell(campaign, "ngram-k3"), campaign, host="h", port=1)
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4}


def test_draft_cell_needs_and_uses_the_trained_draft(campaign):
    with pytest.raises(ConfigurationError, match="training.output"):
        serve_argv(cell(campaign, "draft-k3"), campaign, host="h", port=1)
    argv = serve_argv(cell(campaign, "draft-k3"), campaign, host="h", port=1, training_output="/drafts/d1")
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec["model"] == "/drafts/d1" and spec["method"] == "draft_model"


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("dtype", "float32", ["--dtype", "float32"]),
        ("quantization", "fp8", ["--quantization", "fp8"]),
        ("tensor_parallel_size", 2, ["--tensor-parallel-size", "2"]),
        ("max_num_seqs", 8, ["--max-num-seqs", "8"]),
        ("model", "other/model", ["--model", "other/model"]),
    ],
)
def test_each_serving_field_changes_the_argv(campaign, field, value, expected):
    base = cell(campaign, "standing")
    changed = base.model_copy(update={"serving": base.serving.model_copy(update={field: value})})
    before = serve_argv(base, campaign, host="h", port=1)
    after = serve_argv(changed, campaign, host="h", port=1)
    assert before != after
    joined = " ".join(after)
    assert " ".join(expected) in joined


def test_graph_mode_graph_drops_enforce_eager(campaign):
    base = cell(campaign, "standing")
    graph = base.model_copy(update={"serving": base.serving.model_copy(update={"graph_mode": "graph"})})
    assert "--enforce-eager" not in serve_argv(graph, campaign, host="h", port=1)


def test_unknown_speculative_key_is_refused():
    from services.bench.executors.serving import validate_speculative_keys

    with pytest.raises(ConfigurationError, match="not fields"):
        validate_speculative_keys({"method": "ngram", "num_speculative_tokens": 3, "num_lookahead": 2})


def test_speculative_config_of_none_is_none():
    assert speculative_config(None, training_output=None) is None
