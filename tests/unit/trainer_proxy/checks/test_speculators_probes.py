"""Built-in probes for a head in speculators' format (an EAGLE-3 head), on its real config.

fixtures/eagle3-toy-head-config.json is the config.json that infra/examples/train_eagle3.py
wrote (speculators 0.9.0's save_pretrained) for the 4-layer toy target; the weights here are
random tensors with that checkpoint's names and shapes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from services.trainer_proxy.checks.probes import builtin_checks

CONFIG = Path(__file__).parent / "fixtures" / "eagle3-toy-head-config.json"
SHAPES = {"embed_tokens.weight": (1024, 256), "fc.weight": (256, 768), "input_norm.weight": (768,),
          "layers.0.hidden_norm.weight": (256,), "layers.0.input_layernorm.weight": (256,),
          "layers.0.mlp.down_proj.weight": (256, 688), "layers.0.mlp.gate_proj.weight": (688, 256),
          "layers.0.mlp.up_proj.weight": (688, 256), "layers.0.post_attention_layernorm.weight": (256,),
          "layers.0.self_attn.k_proj.weight": (256, 512), "layers.0.self_attn.o_proj.weight": (256, 256),
          "layers.0.self_attn.q_proj.weight": (256, 512), "layers.0.self_attn.v_proj.weight": (256, 512),
          "lm_head.weight": (1024, 256), "norm.weight": (256,)}


def _head(folder: Path, config: dict | None = None, **tensors) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config or json.loads(CONFIG.read_text())))
    weights = {name: torch.randn(shape).to(torch.bfloat16) for name, shape in SHAPES.items()}
    save_file({**weights, **tensors}, str(folder / "model.safetensors"))
    return folder


def _target(folder: Path, vocab: int = 1024, hidden: int = 256, layers: int = 4) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": vocab, "hidden_size": hidden,
                                                    "num_hidden_layers": layers}))
    return folder


def _checks(head: Path, target: Path) -> dict:
    return {c.name: c for c in builtin_checks(head, target=target, tokenizer=target, prompts=[])}


def test_a_fitting_head_passes_its_three_probes(tmp_path):
    checks = _checks(_head(tmp_path / "head"), _target(tmp_path / "target"))
    assert list(checks) == ["checkpoint_loads", "vocabulary_matches", "head_fits_target"]
    assert all(c.passed for c in checks.values()), checks
    assert "speculators 0.9.0" in checks["checkpoint_loads"].detail
    assert "auxiliary layers [1, 2, 3]" in checks["head_fits_target"].detail


def test_non_finite_weights_fail_the_load(tmp_path):
    head = _head(tmp_path / "head", **{"norm.weight": torch.full((256,), float("nan"))})
    checks = _checks(head, _target(tmp_path / "target"))
    assert not checks["checkpoint_loads"].passed and "norm.weight" in checks["checkpoint_loads"].detail
    assert not checks["vocabulary_matches"].passed  # not run


@pytest.mark.parametrize(("target", "probe", "words"), [
    ({"vocab": 2048}, "vocabulary_matches", "the target's is 2048"),
    ({"hidden": 512}, "head_fits_target", "the target's is 512"),
    ({"layers": 2}, "head_fits_target", "not all within the target's 0..2"),
])
def test_a_head_of_another_target_is_refused_by_name(tmp_path, target, probe, words):
    checks = _checks(_head(tmp_path / "head"), _target(tmp_path / "target", **target))
    assert not checks[probe].passed and words in checks[probe].detail


def test_a_reduced_draft_vocabulary_needs_its_d2t(tmp_path):
    config = json.loads(CONFIG.read_text())
    config["draft_vocab_size"] = 512
    lm_head = torch.randn(512, 256).to(torch.bfloat16)
    missing = _checks(_head(tmp_path / "a", config, **{"lm_head.weight": lm_head}), _target(tmp_path / "t"))
    assert "needs a d2t mapping" in missing["vocabulary_matches"].detail
    mapped = _checks(_head(tmp_path / "b", config,
                           **{"lm_head.weight": lm_head, "d2t": torch.zeros(512, dtype=torch.long)}),
                     _target(tmp_path / "t"))
    assert mapped["vocabulary_matches"].passed
    assert "mapped to the target's by d2t" in mapped["vocabulary_matches"].detail


def test_a_config_without_model_type_is_refused(tmp_path):
    config = json.loads(CONFIG.read_text())
    del config["speculators_model_type"]
    checks = _checks(_head(tmp_path / "head", config), _target(tmp_path / "target"))
    assert not checks["checkpoint_loads"].passed and "save_pretrained" in checks["checkpoint_loads"].detail
