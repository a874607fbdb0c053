"""Built-in probes against real tiny Llama checkpoints (transformers, CPU)."""

from __future__ import annotations

import shutil

import pytest

from services.trainer_proxy.checks.probes import builtin_checks
from tests.unit.trainer_proxy.helpers import build_tiny_models

PROMPTS = [[{"role": "user", "content": "hello world, the quick brown fox"}], [{"role": "user", "content": "lazy dog"}]]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_tiny_models(tmp_path_factory.mktemp("tiny"))


def _by_name(checks):
    return {check.name: check for check in checks}


def test_a_matching_draft_passes_every_probe(models):
    checks = _by_name(builtin_checks(models["draft"], target=models["target"], tokenizer=models["target"],
                                     prompts=PROMPTS))
    assert all(check.passed for check in checks.values()), checks
    assert "sampled token IDs map to the same strings" in checks["vocabulary_matches"].detail
    assert "2 prompt(s)" in checks["forward_pass"].detail


def test_a_mismatched_vocabulary_fails_the_probe(models):
    checks = _by_name(
        builtin_checks(models["draft-vocab120"], target=models["target"], tokenizer=models["target"], prompts=PROMPTS)
    )
    assert checks["checkpoint_loads"].passed
    assert not checks["vocabulary_matches"].passed
    assert "vocab_size is 120, the target's is 100" in checks["vocabulary_matches"].detail
    assert not checks["forward_pass"].passed and "last dimension 120" in checks["forward_pass"].detail


def test_a_tokenizer_that_maps_ids_differently_fails(models, tmp_path):
    draft = tmp_path / "draft"
    shutil.copytree(models["draft"], draft)
    import json

    data = json.loads((draft / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    # Swap two tokens' IDs: same size, other mapping.
    (a, ia), (b, ib) = sorted(vocab.items(), key=lambda kv: kv[1])[10], sorted(vocab.items(), key=lambda kv: kv[1])[-1]
    vocab[a], vocab[b] = ib, ia
    (draft / "tokenizer.json").write_text(json.dumps(data))
    check = _by_name(builtin_checks(draft, target=models["target"], tokenizer=models["target"],
                                    prompts=PROMPTS))["vocabulary_matches"]
    assert not check.passed and "map to other strings" in check.detail


def test_a_missing_or_broken_checkpoint_fails_loading(models, tmp_path):
    checks = builtin_checks(tmp_path / "nothing", target=models["target"], tokenizer=models["target"], prompts=PROMPTS)
    assert [c.passed for c in checks] == [False, False, False]
    assert "no config.json" in checks[0].detail
    broken = tmp_path / "broken"
    shutil.copytree(models["draft"], broken)
    (broken / "model.safetensors").write_bytes(b"not weights")
    checks = builtin_checks(broken, target=models["target"], tokenizer=models["target"], prompts=PROMPTS)
    assert not checks[0].passed and "does not load" in checks[0].detail
