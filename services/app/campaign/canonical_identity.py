"""A canonical cell's identity labels against what its serve command runs (docs/configuration.md, "Identity labels").

A label the command sets is compared with the command statically; a label the command
leaves to vLLM or to the checkpoint is read from the checkpoint's own config.json where
the checkpoint is here, and otherwise recorded as unchecked (the record's and the plan's
`unchecked_labels`) rather than refused: nothing on this machine can say otherwise.
`none` and an unset quantization are the same thing.

Pure apart from reading the checkpoint's config files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from contracts.campaign.canonical import CanonicalCell

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


def label_matches(label: str, names: set[str]) -> bool:
    """Whether a label names one of the checkpoint's or the command's quantization names."""
    want = re.sub(r"[-_]", "", label.lower())
    return any(want in _names(name) for name in names)


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


def quant_problems(cell: CanonicalCell, args: dict[str, Any], model: str | None, *, where: str, base: Path
                   ) -> tuple[list[str], dict[str, str]]:
    """The cell's `quant` label against its command (--quantization) or its checkpoint: the problems, and the
    label left unchecked here with why."""
    label = quant_label(cell.quant)
    served = quant_label(args.get("quantization"))
    if served is not None or args.get("quantization") is not None:
        if (label is None) != (served is None) or (label is not None and not label_matches(label, {served or ""})):
            return [f"{where}.quant is {cell.quant!r}, but its serve command runs --quantization {served!r}: the "
                    "identity label must say what is served"], {}
        return [], {}
    folder = Path(model) if model and Path(model).is_absolute() else base / (model or "")
    read = checkpoint_quantization(folder) if model else None
    if read is None:
        if label is None:
            return [], {}
        return [], {"quant": f"{cell.quant!r}: the serve command sets no --quantization, so vLLM takes it from the "
                    f"checkpoint {model!r}, which is not here to read (no {CONFIG}); the engine read-back states the "
                    "quantization the server runs"}
    names, source = read
    if label is None and not names:
        return [], {}
    if label is not None and names and label_matches(label, names):
        return [], {}
    runs = f"quantized ({', '.join(sorted(names))})" if names else "unquantized"
    return [f"{where}.quant is {cell.quant!r}, but its serve command sets no --quantization and its checkpoint's "
            f"{source} says it is {runs}, which vLLM serves: the identity label must say what is served"], {}


def batched_tokens_problems(cell: CanonicalCell, args: dict[str, Any], *, where: str
                            ) -> tuple[list[str], dict[str, str]]:
    """The `max_num_batched_tokens` label against the command's; left to vLLM (its scheduler default, decided at
    start), it is unchecked here."""
    label = cell.max_num_batched_tokens
    if label is None:
        return [], {}
    served = args.get("max_num_batched_tokens")
    if served is None:
        return [], {"max_num_batched_tokens": f"{label}: the serve command sets no --max-num-batched-tokens, so "
                    "vLLM decides it at start; the engine read-back states the value the server runs"}
    if int(served) != int(label):
        return [f"{where}.max_num_batched_tokens is {label!r}, but its serve command runs {served!r}: the identity "
                "label must say what is served"], {}
    return [], {}
