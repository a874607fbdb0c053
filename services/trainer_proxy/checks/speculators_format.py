"""The built-in probes for a head in `speculators`' format (an EAGLE-3 head: `method: eagle3`).

Such a checkpoint is no transformers causal LM and its forward needs the target's hidden states, so it
is checked from its config.json and safetensors alone, with head_fits_target in place of forward_pass
(docs/trainer-proxy.md#probes). vLLM reads it directly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Finding = tuple[str, bool, str]
NAMES = ("checkpoint_loads", "vocabulary_matches", "head_fits_target")


def is_speculators_checkpoint(checkpoint_dir: Path) -> bool:
    try:
        config = json.loads((checkpoint_dir / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "speculators_config" in config


def _weights(checkpoint_dir: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    tensors: dict[str, Any] = {}
    for path in sorted(checkpoint_dir.glob("*.safetensors")):
        tensors.update(load_file(str(path)))
    return tensors


def checks(checkpoint_dir: Path, target: Path) -> list[Finding]:
    """The three findings; never raises for a bad checkpoint (that is a finding)."""
    import torch

    not_run = [(name, False, "not run: the checkpoint did not load") for name in NAMES[1:]]
    config = json.loads((checkpoint_dir / "config.json").read_text())
    spec = config.get("speculators_config") or {}
    kind, algorithm = config.get("speculators_model_type"), spec.get("algorithm")
    if not kind or not algorithm:
        return [(NAMES[0], False, f"{checkpoint_dir}/config.json has speculators_config but no "
                 "speculators_model_type or algorithm: save the head with speculators' save_pretrained"), *not_run]
    try:
        tensors = _weights(checkpoint_dir)
    except Exception as exc:  # noqa: BLE001 - a weight file that does not load is the finding
        return [(NAMES[0], False, f"the weights in {checkpoint_dir} do not load: {type(exc).__name__}: {exc}"[:500]),
                *not_run]
    if not tensors:
        return [(NAMES[0], False, f"no *.safetensors weights in {checkpoint_dir}"), *not_run]
    bad = [name for name, t in tensors.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        return [(NAMES[0], False, f"non-finite weights in {', '.join(sorted(bad)[:5])}"), *not_run]
    params = sum(t.numel() for t in tensors.values())
    found = [(NAMES[0], True, f"speculators {kind} head ({algorithm}, speculators "
              f"{config.get('speculators_version', '?')}): {len(tensors)} tensors, {params} parameters, all finite")]
    try:
        target_config = json.loads((target / "config.json").read_text())
    except (OSError, ValueError) as exc:
        return found + [(name, False, f"the target's config.json at {target} does not read: {exc}")
                        for name in NAMES[1:]]
    text = target_config.get("text_config") or target_config
    found.append(_vocabulary(config, tensors, int(text.get("vocab_size") or 0)))
    found.append(_fits(config, tensors, int(text.get("hidden_size") or 0), int(text.get("num_hidden_layers") or 0)))
    return found


def _vocabulary(config: dict[str, Any], tensors: dict[str, Any], target_vocab: int) -> Finding:
    layer = config.get("transformer_layer_config") or {}
    verifier_vocab = layer.get("vocab_size")
    draft_vocab = config.get("draft_vocab_size") or verifier_vocab
    problems = []
    if verifier_vocab != target_vocab:
        problems.append(f"the head's verifier vocab_size is {verifier_vocab}, the target's is {target_vocab}")
    head = tensors.get("lm_head.weight")
    if head is None or int(head.shape[0]) != draft_vocab:
        problems.append(f"lm_head.weight has {None if head is None else int(head.shape[0])} rows, "
                        f"draft_vocab_size is {draft_vocab}")
    if draft_vocab != target_vocab:
        d2t = tensors.get("d2t")
        if d2t is None or int(d2t.shape[0]) != draft_vocab:
            problems.append(f"a draft vocabulary of {draft_vocab} (target {target_vocab}) needs a d2t mapping of "
                            f"{draft_vocab} entries; found {None if d2t is None else int(d2t.shape[0])}")
    if problems:
        return (NAMES[1], False, "; ".join(problems))
    mapped = "" if draft_vocab == target_vocab else ", mapped to the target's by d2t"
    return (NAMES[1], True,
            f"verifier vocab_size {verifier_vocab} equals the target's; draft vocabulary {draft_vocab}{mapped}")


def _fits(config: dict[str, Any], tensors: dict[str, Any], target_hidden: int, target_layers: int) -> Finding:
    layer = config.get("transformer_layer_config") or {}
    hidden = config.get("target_hidden_size") or layer.get("hidden_size")
    aux = config.get("eagle_aux_hidden_state_layer_ids") or []
    problems = []
    if hidden != target_hidden:
        problems.append(f"the head expects target hidden size {hidden}, the target's is {target_hidden}")
    if aux and not all(0 <= i <= target_layers for i in aux):
        problems.append(f"auxiliary layers {aux} are not all within the target's 0..{target_layers}")
    fc = tensors.get("fc.weight")
    width = len(aux or [0, 0, 0]) * (hidden or 0)
    if fc is not None and int(fc.shape[-1]) != width:
        problems.append(f"fc.weight takes {int(fc.shape[-1])} inputs, {len(aux or [0] * 3)} auxiliary states of "
                        f"{hidden} need {width}")
    if problems:
        return (NAMES[2], False, "; ".join(problems))
    return (NAMES[2], True, f"hidden size {hidden} is the target's, auxiliary layers {aux or 'vLLM default'} "
            f"within its {target_layers} (no forward pass: a head's needs the target's hidden states)")
