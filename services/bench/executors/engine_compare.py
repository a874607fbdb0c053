"""A cell's declared serving config against what its engine runs: the rules, one FieldCheck per field.

The declared side comes from the plan's cell (what the approval covered), the
effective side from engine_log.py's EffectiveConfig; the rules are in `compare`
(docs/bench-runner.md, "The engine's effective config").
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.artifacts.engine import (
    CHECKED_FIELDS,
    RECEIVED_SPECULATIVE_KEYS,
    EffectiveConfig,
    EngineCheck,
    FieldCheck,
)
from services.bench.executors.engine_log import as_int
from services.bench.planning.model import CellPlan
from services.shared.quant_labels import checkpoint_quantization, label_matches, quant_label

# Methods whose --speculative-config names no draft checkpoint (the log then says model=None).
NO_DRAFT_METHODS = frozenset({"ngram", "suffix", "mtp"})
# How a canonical command that sets no --quantization shows on the declared side when no label is known.
UNSET = "unset (the checkpoint's)"


@dataclass(frozen=True)
class Declared:
    """A cell's serving config as its plan resolved it (the draft path with {training.output} filled)."""

    model: str
    dtype: str
    quantization: str | None
    tensor_parallel_size: int
    graph_mode: str
    max_num_seqs: int | None
    max_model_len: int | None
    speculative: dict[str, Any] | None
    # What a canonical cell's `vllm serve` command sets (None: not declared, the engine's own default).
    enable_prefix_caching: bool | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_dtype: str | None = None
    # A canonical command that sets no --quantization leaves it to the checkpoint (vLLM reads it there): then
    # `quant_label` (the cell's label, 'none' for none; None: no label known) is what the engine is held to.
    quantization_unset: bool = False
    quant_label: str | None = None


def declared_of(cell: CellPlan, *, max_model_len: int | None) -> Declared:
    """From the plan's cell (what the approval covered) and the target's max_model_len."""
    ident = cell.identity
    serving = ident["serving_config"]
    args = cell.declared_engine_args or {}
    return Declared(
        model=ident["model"],
        dtype=serving.get("dtype") or "auto",
        quantization=quant_label(ident.get("quantization")),
        tensor_parallel_size=int(str(ident["parallelism"]).removeprefix("tp=")),
        graph_mode=ident["graph_mode"],
        max_num_seqs=serving.get("max_num_seqs"),
        max_model_len=max_model_len,
        speculative=cell.speculative_config,
        enable_prefix_caching=args.get("enable_prefix_caching"),
        max_num_batched_tokens=args.get("max_num_batched_tokens"),
        kv_cache_dtype=args.get("kv_cache_dtype"),
        quantization_unset=cell.declared_engine_args is not None and quant_label(args.get("quantization")) is None,
        quant_label=cell.quant_label,
    )


_DTYPES = {"half": "float16", "fp16": "float16", "float16": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float": "float32", "float32": "float32", "fp32": "float32"}


def normalize_dtype(value: str | None) -> str | None:
    if value is None:
        return None
    name = str(value).strip().lower().removeprefix("torch.")
    return _DTYPES.get(name, name)


def normalize_model(value: str | None) -> str | None:
    """A path (anything with a separator, or that exists here) as its resolved absolute form; a name as is."""
    if value is None:
        return None
    text = str(value)
    if os.sep in text or text.startswith(".") or os.path.exists(text):
        return os.path.realpath(os.path.abspath(os.path.expanduser(text)))
    return text


def compare(declared: Declared, effective: EffectiveConfig) -> list[FieldCheck]:
    """Every CHECKED_FIELDS entry, in order. Rules (docs/bench-runner.md):

    dtype `auto` matches any resolved dtype, an explicit one must equal it
    (float16/half, bfloat16, float32/float are one each); max_num_seqs and a
    draft model not declared match anything; quantization as `_quantization_row`
    says; no declared speculation means the engine must run none; model and
    draft model compare as resolved absolute paths, or as names.
    """
    spec = declared.speculative or {}
    method = spec.get("method") or "none"
    k = as_int(spec.get("num_speculative_tokens")) if spec else None
    draft = spec.get("model") if method not in NO_DRAFT_METHODS else None
    quantization, quant_unverifiable = _quantization_row(declared, effective)
    rows: dict[str, tuple[Any, Any, bool]] = {
        "model": (declared.model, effective.model,
                  normalize_model(declared.model) == normalize_model(effective.model)),
        "dtype": (declared.dtype, effective.dtype,
                  declared.dtype == "auto" or normalize_dtype(declared.dtype) == normalize_dtype(effective.dtype)),
        "quantization": quantization,
        "tensor_parallel_size": (declared.tensor_parallel_size, effective.tensor_parallel_size,
                                 declared.tensor_parallel_size == effective.tensor_parallel_size),
        "graph_mode": (declared.graph_mode, effective.graph_mode, declared.graph_mode == effective.graph_mode),
        "max_num_seqs": (declared.max_num_seqs, effective.max_num_seqs,
                         declared.max_num_seqs is None or declared.max_num_seqs == effective.max_num_seqs),
        "max_model_len": (declared.max_model_len, effective.max_model_len,
                          declared.max_model_len is None or declared.max_model_len == effective.max_model_len),
        "speculative_method": (method, effective.speculative_method or "none",
                               method == (effective.speculative_method or "none")),
        "num_speculative_tokens": (k, effective.num_speculative_tokens, k == effective.num_speculative_tokens),
        "draft_model": (draft, effective.draft_model,
                        draft is None or normalize_model(draft) == normalize_model(effective.draft_model)),
    }
    unverifiable: set[str] = {"quantization"} if quant_unverifiable else set()
    # The engine's own statements of the canonical command's other arguments: not declared passes anything, a
    # declared value the engine states nowhere is unverifiable (shown, never counted as checked).
    kv_declared = None if declared.kv_cache_dtype in (None, "auto") else declared.kv_cache_dtype
    for key, want, same in (
            ("enable_prefix_caching", declared.enable_prefix_caching, lambda a, b: a == b),
            ("max_num_batched_tokens", declared.max_num_batched_tokens, lambda a, b: as_int(a) == as_int(b)),
            ("kv_cache_dtype", kv_declared, lambda a, b: str(a).lower() == str(b).lower())):
        got = getattr(effective, key)
        if want is not None and got is None and not _stated_absent(key, effective):
            unverifiable.add(key)
            rows[key] = (want, None, True)
        else:
            rows[key] = (want, got, want is None or (got is not None and same(want, got)))
    for key in RECEIVED_SPECULATIVE_KEYS:
        want = spec.get(key)
        if effective.received_speculative is None:
            rows[key] = (want, None, True)
            if want is not None:
                unverifiable.add(key)
        else:
            got = effective.received_speculative.get(key)
            rows[key] = (want, got, want is None or _same_received(got, want))
    return [FieldCheck(field=name, declared=rows[name][0], effective=rows[name][1], ok=rows[name][2],
                       unverifiable=name in unverifiable) for name in CHECKED_FIELDS]


def _quantization_row(declared: Declared, effective: EffectiveConfig) -> tuple[tuple[Any, Any, bool], bool]:
    """(declared, effective, ok) for quantization, and whether it stays unverifiable.

    A --quantization the command sets (or specdec's `serving.quantization`) must equal the engine's, none
    when unset. A canonical command that sets none leaves it to the checkpoint: the engine's method is
    what is served, held to the cell's label where known (none against none; a label against the names
    of the method and, where the checkpoint is here, its config's). A quantized label the method does not
    name, with no checkpoint here to say the scheme, stays unverifiable (shown, not counted as checked)."""
    served = effective.quantization or "none"
    if not declared.quantization_unset:
        want = declared.quantization or "none"
        return (want, served, want.lower() == served.lower()), False
    label = declared.quant_label
    if label is None:
        return (UNSET, served, True), False
    wanted, runs = quant_label(label), quant_label(effective.quantization)
    if wanted is None or runs is None:
        return (label, served, wanted is None and runs is None), False
    if label_matches(wanted, {runs}):
        return (label, served, True), False
    model = normalize_model(effective.model)
    read = checkpoint_quantization(Path(model)) if model and os.path.isabs(model) else None
    if read is None:
        return (label, served, True), True
    return (label, served, label_matches(wanted, read[0])), False


def _same_received(got: Any, want: Any) -> bool:
    """A received speculative key against the declared one: an int, a float (the suffix method's spec factor and
    token probability), or a schedule's [start, end, k] entries."""
    if isinstance(want, float) or isinstance(got, float):
        try:
            return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-12)
        except (TypeError, ValueError):
            return False
    if isinstance(want, (list, tuple)):
        try:
            return [tuple(int(v) for v in e) for e in got] == [tuple(int(v) for v in e) for e in want]
        except (TypeError, ValueError):
            return False
    return as_int(got) == as_int(want)


def _stated_absent(key: str, effective: EffectiveConfig) -> bool:
    """True where the engine's record shows the value was not passed (so the engine runs its default, a mismatch
    for a declared one) rather than saying nothing about it."""
    return key == "max_num_batched_tokens" and any(s.startswith(f"{key}: not passed") for s in effective.sources)


def engine_check(cell_id: str, launch: int, declared: Declared, effective: EffectiveConfig) -> EngineCheck:
    return EngineCheck(cell_id=cell_id, launch=launch, effective=effective, checks=compare(declared, effective))


def mismatch_reason(check: EngineCheck) -> str:
    """One sentence naming every mismatched field with its declared and effective value."""
    parts = []
    for row in check.mismatches:
        effective = repr(row.effective)
        if row.field in ("max_num_seqs", "max_num_batched_tokens") and row.effective is None:
            effective = next((s.removeprefix(f"{row.field}: ") for s in check.effective.sources
                              if s.startswith(f"{row.field}:")), "not stated")
        elif row.effective is None and row.field in ("num_speculative_tokens", "draft_model") \
                and check.effective.speculative_method is None and check.effective.vllm_version is not None:
            effective = "none (the engine runs no speculation)"
        elif row.effective is None:
            effective = "not stated by the engine"
        parts.append(f"{row.field}: declared {row.declared!r}, effective {effective}")
    return (f"the engine of cell {check.cell_id} (launch {check.launch}) does not run what the cell declares: "
            + "; ".join(parts) + " (the engine's own record: vLLM's start-up config line and /v1/models; "
            "make the serve command pass every declared field through to vLLM)")

