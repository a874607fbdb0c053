"""A canonical cell whose `vllm serve` command sets no --quantization serves its checkpoint's quantization
(vLLM reads it from the checkpoint); a cell that declares a quantization (or none, in specdec's own keys) is
held to it (docs/configuration.md, "Identity labels"). The plan's `quant_label` (a canonical cell's `quant`,
'none' when left out, as none and unset are one thing) is what the engine is held to then: a real mismatch
fails the cell, naming the field. Only a plan stored before that field existed has no label: its read-back
records what the engine runs and does not fail the cell for it."""

from __future__ import annotations

import json
from pathlib import Path

from services.bench.executors.engine_compare import declared_of, engine_check, mismatch_reason
from services.bench.executors.engine_log import effective_config, read_log
from tests.unit.bench.executors.test_engine_args_readback import TARGET, cell, fixture_text


def quantized() -> tuple[str, dict]:
    text, models = fixture_text("eager-no-spec")
    assert "quantization=None" in text
    return text.replace("quantization=None", "quantization=modelopt_fp4"), models


def row(args, text: str, models: dict, label: str | None = None):
    return next(r for r in checked(args, text, models, label).checks if r.field == "quantization")


def checked(args, text: str, models: dict, label: str | None = None):
    plan = cell(args).model_copy(update={"quant_label": label})
    return engine_check("c", 0, declared_of(plan, max_model_len=512), effective_config(read_log(text), models))


def served_from(folder: Path, method: str, config: dict | None) -> tuple[str, dict]:
    """The fixture's engine serving `folder` quantized by `method`; the checkpoint's config.json, when given."""
    text, models = fixture_text("eager-no-spec")
    if config is not None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(config))
    return text.replace(TARGET, str(folder)).replace("quantization=None", f"quantization={method}"), models


def test_a_plan_without_a_label_records_the_checkpoints_quantization():
    text, models = quantized()
    found = row({"model_tag": "m"}, text, models)  # no --quantization, a plan stored before quant_label
    assert found.ok and found.effective == "modelopt_fp4"


def test_a_declared_quantization_is_still_held_to():
    text, models = quantized()
    assert not row(None, text, models).ok  # specdec's keys: serving.quantization unset is none
    assert not row({"model_tag": "m", "quantization": "fp8"}, text, models).ok


def test_the_label_is_what_the_engine_is_held_to_where_the_command_leaves_quantization_to_the_checkpoint():
    text, models = quantized()
    canonical = {"model_tag": "m"}
    assert row(canonical, text, models, label="nvfp4").ok  # ModelOpt's NVFP4 runs as modelopt_fp4
    check = checked(canonical, text, models, label="none")  # the label says unquantized; the checkpoint is not
    assert [r.field for r in check.mismatches] == ["quantization"]
    assert "quantization: declared 'none', effective 'modelopt_fp4'" in mismatch_reason(check)
    plain, models = fixture_text("eager-no-spec")
    assert row(canonical, plain, models, label="none").ok
    assert not row(canonical, plain, models, label="fp8").ok  # a quantized label on an unquantized engine


def test_a_scheme_inside_the_method_is_read_from_the_checkpoint_where_it_is_here(tmp_path):
    config = {"quantization_config": {"quant_method": "compressed-tensors",
                                      "config_groups": {"g": {"format": "nvfp4-pack-quantized"}}}}
    text, models = served_from(tmp_path / "ckpt", "compressed-tensors", config)
    canonical = {"model_tag": "m"}
    assert row(canonical, text, models, label="nvfp4").ok
    assert not row(canonical, text, models, label="fp8").ok
    # No checkpoint here to say the scheme: shown, never counted as checked.
    text, models = served_from(tmp_path / "elsewhere", "compressed-tensors", None)
    found = row(canonical, text, models, label="fp8")
    assert found.ok and found.unverifiable
