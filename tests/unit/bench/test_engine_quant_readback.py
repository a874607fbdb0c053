"""A canonical cell whose `vllm serve` command sets no --quantization serves its checkpoint's quantization
(vLLM reads it from the checkpoint): the read-back records what the engine runs and does not fail the cell
for it; a cell that declares a quantization (or none, in specdec's own keys) is still held to it
(docs/configuration.md, "Identity labels")."""

from __future__ import annotations

import pytest

from services.bench.executors.engine_compare import declared_of, engine_check
from services.bench.executors.engine_log import effective_config, read_log
from tests.unit.bench.test_engine_args_readback import cell, fixture_text


def quantized() -> tuple[str, dict]:
    text, models = fixture_text("eager-no-spec")
    assert "quantization=None" in text
    return text.replace("quantization=None", "quantization=modelopt_fp4"), models


def row(args, text: str, models: dict):
    check = engine_check("c", 0, declared_of(cell(args), max_model_len=512), effective_config(read_log(text), models))
    return next(r for r in check.checks if r.field == "quantization")


@pytest.mark.xfail(strict=True, reason="issue 41: an unset --quantization is read back as 'none'")
def test_a_command_without_quantization_serves_the_checkpoints():
    text, models = quantized()
    found = row({"model_tag": "m"}, text, models)  # a canonical command that sets no --quantization
    assert found.ok and found.effective == "modelopt_fp4"


def test_a_declared_quantization_is_still_held_to():
    text, models = quantized()
    assert not row(None, text, models).ok  # specdec's keys: serving.quantization unset is none
    assert not row({"model_tag": "m", "quantization": "fp8"}, text, models).ok
