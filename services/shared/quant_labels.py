"""A quantization label against the names a command, an engine or a checkpoint gives a quantization.

Shared by submit's identity checks (services/app/campaign/canonical_identity.py) and the engine read-back
(services/bench/executors/engine_compare.py). `none` and an unset quantization are the same thing.
Pure apart from reading a checkpoint's config files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# The files vLLM reads a checkpoint's quantization from: config.json's quantization_config, and ModelOpt's own.
CONFIG = "config.json"
MODELOPT_CONFIG = "hf_quant_config.json"
_QUANT_KEYS = ("quant_method", "quant_algo", "format")


def quant_label(value: Any) -> str | None:
    """A quantization label as compared: None for none (unset, empty, 'none', 'null')."""
    text = "" if value is None else str(value).strip()
    return None if text.lower() in ("", "none", "null") else text


def _names(value: str) -> set[str]:
    # `nvfp4` names `nvfp4-pack-quantized`; `fp8` names `fp8`; case, '-' and '_' aside.
    lowered = value.lower()
    return {re.sub(r"[-_]", "", lowered), *(part for part in re.split(r"[-_]", lowered) if part)}


# vLLM's quantization methods whose scheme a label names by another word: ModelOpt's NVFP4 and FP8 checkpoints
# run as `modelopt_fp4` and `modelopt`. Any other scheme inside a method comes from the checkpoint's config.
METHOD_SCHEMES = {"modelopt_fp4": ("nvfp4",), "modelopt": ("fp8",)}


def label_matches(label: str, names: set[str]) -> bool:
    """Whether a label names one of the checkpoint's, the command's or the engine's quantization names (a
    method's scheme included: `nvfp4` names `modelopt_fp4`)."""
    want = re.sub(r"[-_]", "", label.lower())
    schemes = {scheme for name in names for scheme in METHOD_SCHEMES.get(name.lower(), ())}
    return any(want in _names(name) for name in names | schemes)


def checkpoint_quantization(folder: Path) -> tuple[set[str], str] | None:
    """The names a local checkpoint gives its quantization (empty: unquantized) and the file they come from;
    None when the checkpoint is not here to read (a hub name, a path elsewhere, no readable config.json)."""
    config = folder / CONFIG
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    names: set[str] = set()
    found = data.get("quantization_config") or data.get("compression_config")
    if isinstance(found, dict):
        names |= {str(found[key]) for key in _QUANT_KEYS if isinstance(found.get(key), str)}
        for group in (found.get("config_groups") or {}).values():
            if isinstance(group, dict) and isinstance(group.get("format"), str):
                names.add(group["format"])
    modelopt = folder / MODELOPT_CONFIG
    if not names and modelopt.is_file():
        try:
            algo = (json.loads(modelopt.read_text(encoding="utf-8")).get("quantization") or {}).get("quant_algo")
        except (OSError, ValueError, AttributeError):
            algo = None
        if isinstance(algo, str):
            return {"modelopt", algo}, str(modelopt)
    return names, str(config)
