"""A canonical cell's identity labels against what its serve command runs (docs/configuration.md, "Identity labels").

A label the command sets is checked statically, one it leaves to the checkpoint against the
checkpoint's config.json where it is here; otherwise it is recorded as unchecked, never refused.
Pure apart from reading the checkpoint's config files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contracts.campaign.canonical import CanonicalCell
from services.shared.quant_labels import CONFIG, checkpoint_quantization, label_matches, quant_label


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
