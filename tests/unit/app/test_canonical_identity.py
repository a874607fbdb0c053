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

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "infra/examples/canonical-campaign.yaml"


def example(quant: Any) -> dict[str, Any]:
    data = yaml.safe_load(EXAMPLE.read_text())
    for cell in data["cells"]:
        cell["quant"] = quant
    return data


def translated(data: dict[str, Any], base: Path) -> Campaign:
    campaign, _ = canonical.translate(data, base=base)
    return Campaign.model_validate(campaign)


@pytest.mark.xfail(strict=True, reason="issue 41: quant 'none' is compared with the command's None and refused")
def test_quant_none_is_a_command_without_quantization(tmp_path):
    (tmp_path / "models/toy-target").mkdir(parents=True)  # a local checkpoint without quantization_config
    campaign = translated(example("none"), base=tmp_path)
    assert {cell.serving.quantization for cell in campaign.matrix.cells} == {None}


@pytest.mark.xfail(strict=True, reason="issue 41: a quant label left to the checkpoint is refused statically")
def test_a_quant_label_the_command_leaves_to_a_checkpoint_that_is_not_here_is_not_refused(tmp_path):
    # The workflow's public example: `quant: nvfp4` and no --quantization; vLLM takes it from the checkpoint,
    # which is not on this machine, so nothing here can say otherwise.
    translated(example("nvfp4"), base=tmp_path)
