"""A canonical cell's identity labels against what its serve command runs (docs/configuration.md,
"Identity labels").

A label the command sets is compared with it; a label the command leaves to vLLM or to the
checkpoint (quantization) is read from the checkpoint's own config.json where the checkpoint is
here, and left to the run's engine read-back where it is not. `none` and an unset quantization
are the same thing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.campaign import Campaign
from services.app.campaign import canonical

ROOT = Path(__file__).resolve().parents[4]
EXAMPLE = ROOT / "infra/examples/canonical-campaign.yaml"


def example(quant: Any) -> dict[str, Any]:
    data = yaml.safe_load(EXAMPLE.read_text())
    for cell in data["cells"]:
        cell["quant"] = quant
    return data


def translated(data: dict[str, Any], base: Path) -> Campaign:
    campaign, _ = canonical.translate(data, base=base)
    return Campaign.model_validate(campaign)


def test_quant_none_is_a_command_without_quantization(tmp_path):
    (tmp_path / "models/toy-target").mkdir(parents=True)  # a local checkpoint without quantization_config
    campaign = translated(example("none"), base=tmp_path)
    assert {cell.serving.quantization for cell in campaign.matrix.cells} == {None}


def test_a_quant_label_the_command_leaves_to_a_checkpoint_that_is_not_here_is_not_refused(tmp_path):
    # The workflow's public example: `quant: nvfp4` and no --quantization; vLLM takes it from the checkpoint,
    # which is not on this machine, so nothing here can say otherwise.
    _, record = canonical.translate(example("nvfp4"), base=tmp_path)
    # Said, not refused: the record (canonical.json, the plan) names the label left to the run's read-back.
    assert all("not here to read" in cell.unchecked_labels["quant"] for cell in record.cells)


def checkpoint(tmp_path: Path, config: dict[str, Any]) -> None:
    folder = tmp_path / "models/toy-target"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))


def test_a_quant_label_the_command_leaves_to_a_local_checkpoint_is_read_from_its_config(tmp_path):
    checkpoint(tmp_path, {"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}})
    _, record = canonical.translate(example("nvfp4"), base=tmp_path)
    assert all(cell.unchecked_labels == {} for cell in record.cells)
    for wrong in ("none", "awq"):
        with pytest.raises(canonical.CanonicalProblems) as refused:
            canonical.translate(example(wrong), base=tmp_path)
        assert all("config.json says it is quantized (NVFP4, modelopt)" in p for p in refused.value.problems), \
            refused.value.problems


def test_an_unquantized_local_checkpoint_refuses_a_quant_label(tmp_path):
    checkpoint(tmp_path, {"torch_dtype": "float32"})
    with pytest.raises(canonical.CanonicalProblems, match="config.json says it is unquantized"):
        canonical.translate(example("nvfp4"), base=tmp_path)
    translated(example(None), base=tmp_path)


def test_a_label_the_command_sets_is_compared_with_it_by_name(tmp_path):
    data = example("awq")
    for cell in data["cells"]:
        cell["vllm_sweep"]["serve_cmd"] += " --quantization fp8"
    with pytest.raises(canonical.CanonicalProblems, match=r"cells\[standing\]\.quant is 'awq', but its serve command "
                       r"runs --quantization 'fp8'"):
        canonical.translate(data, base=tmp_path)
    for cell in data["cells"]:
        cell["quant"] = "FP8"
    translated(data, base=tmp_path)


def test_max_num_batched_tokens_left_to_vllm_is_said_not_refused(tmp_path):
    data = example(None)
    data["cells"][0]["max_num_batched_tokens"] = 256
    _, record = canonical.translate(data, base=tmp_path)
    assert "vLLM decides it at start" in record.cells[0].unchecked_labels["max_num_batched_tokens"]
    data["cells"][0]["vllm_sweep"]["serve_cmd"] += " --max-num-batched-tokens 512"
    with pytest.raises(canonical.CanonicalProblems, match=r"max_num_batched_tokens is 256, but its serve command "
                       "runs 512"):
        canonical.translate(data, base=tmp_path)
