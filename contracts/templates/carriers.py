"""How an operator template carries each declared field, and what a cell declares.

Pure (no I/O). A `Carrier` names a field's placeholders and the literal flags
that can stand in for them; `SERVE_CARRIERS` and `BENCH_CARRIERS` are the
tables. `serve_declared` and `bench_declared` turn one cell into `Declared`
items: the value it declares, whether its template must carry it, and what a
literal flag must say to agree. contracts/templates/check.py reads templates
against them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from contracts.campaign import Campaign, Cell, LoadSpec
from contracts.templates.values import ENDPOINT_PATHS


@dataclass(frozen=True)
class Carrier:
    """How a template can carry one field: any of its placeholders, or a literal flag."""

    field: str  # as the operator writes it
    placeholders: tuple[str, ...]  # the first is the one suggested
    flags: tuple[str, ...] = ()  # literal spellings the consumer accepts; the first is suggested
    switch: bool = False  # a flag without a value: present means on
    off_flags: tuple[str, ...] = ()  # a switch's explicit "off" spelling


SERVE_CARRIERS: dict[str, Carrier] = {
    "model": Carrier("serving.model", ("model",), ("--model",)),
    "dtype": Carrier("serving.dtype", ("dtype",), ("--dtype",)),
    "quantization": Carrier("serving.quantization", ("quantization", "quantization_flag"), ("--quantization", "-q")),
    "tensor_parallel_size": Carrier("serving.tensor_parallel_size", ("tensor_parallel_size",),
                                    ("--tensor-parallel-size", "-tp")),
    "graph_mode": Carrier("serving.graph_mode", ("enforce_eager_flag",), ("--enforce-eager",), switch=True,
                          off_flags=("--no-enforce-eager",)),
    "max_num_seqs": Carrier("serving.max_num_seqs", ("max_num_seqs", "max_num_seqs_flag"), ("--max-num-seqs",)),
    "max_model_len": Carrier("target.max_model_len", ("max_model_len",), ("--max-model-len",)),
    "speculative": Carrier("serving.speculative", ("speculative_config_json", "speculative_config_flag"),
                           ("--speculative-config", "-sc")),
}

BENCH_CARRIERS: dict[str, Carrier] = {
    "address": Carrier("the served cell's address", ("base_url", "port")),
    "result_path": Carrier("the result file specdec reads", ("result_path",)),
    "prompts": Carrier("the bench's prompts (bench/prompts.jsonl)", ("prompts_path",)),
    "num_prompts": Carrier("matrix.load.num_prompts", ("num_prompts",), ("--num-prompts",)),
    "concurrency": Carrier("matrix.cells[].concurrency", ("concurrency",), ("--max-concurrency", "--concurrency")),
    "warmup_requests": Carrier("matrix.load.warmup_requests", ("warmup_requests",),
                               ("--num-warmups", "--warmup-requests")),
    "endpoint": Carrier("matrix.load.endpoint", ("endpoint",), ("--endpoint",)),
    "request_rate": Carrier("matrix.load.request_rate", ("request_rate",), ("--request-rate",)),
    "burstiness": Carrier("matrix.load.burstiness", ("burstiness",), ("--burstiness",)),
    "max_output_tokens": Carrier("matrix.load.max_output_tokens", ("max_output_tokens",),
                                 ("--max-output-tokens", "--max-tokens")),
    "ignore_eos": Carrier("matrix.load.ignore_eos", ("ignore_eos_flag", "ignore_eos"), ("--ignore-eos",), switch=True,
                          off_flags=("--no-ignore-eos",)),
}


@dataclass(frozen=True)
class Declared:
    """One field as a cell declares it, and what a literal must say to agree."""

    carrier: Carrier
    shown: str  # the declared value, in words ('' where there is none to show)
    required: bool  # the template must carry it
    agrees: Callable[[str | None], bool]  # literal value (None: a switch's "on" flag) -> agrees?
    unset_placeholder: str | None = None  # a value placeholder with nothing to render
    why: str = ""  # why a literal cannot agree, when it never can


def as_int(text: str | None) -> int | None:
    """A literal's integer; None where there is none or it is not one."""
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def as_float(text: str | None) -> float | None:
    """A literal's number; None where there is none or it is not one (check.py's options read it too)."""
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


_DTYPE_ALIASES = {"half": "float16", "float": "float32"}


def _dtype(text: str | None) -> str:
    value = (text or "").strip().lower().removeprefix("torch.")
    return _DTYPE_ALIASES.get(value, value)


def _switch(on: bool) -> Callable[[str | None], bool]:
    # A switch literal: None is its "on" flag, "off" its off flag.
    return lambda value: (value is None) == on


def _equals_int(want: int | None) -> Callable[[str | None], bool]:
    return lambda value: want is not None and as_int(value) == want


def serve_declared(cell: Cell, campaign: Campaign) -> list[Declared]:
    """Every serving field of a cell, as its serve template must carry it."""
    s = cell.serving
    model = s.model or campaign.target.checkpoint
    spec = s.speculative
    return [
        Declared(SERVE_CARRIERS["model"], model, s.model is not None,
                 lambda v: os.path.normpath(v or "") == os.path.normpath(model)),
        Declared(SERVE_CARRIERS["dtype"], s.dtype, _dtype(s.dtype) != "auto", lambda v: _dtype(v) == _dtype(s.dtype)),
        Declared(SERVE_CARRIERS["quantization"], s.quantization or "none", s.quantization is not None,
                 lambda v: (v or "") == (s.quantization or "")),
        Declared(SERVE_CARRIERS["tensor_parallel_size"], str(s.tensor_parallel_size), s.tensor_parallel_size > 1,
                 _equals_int(s.tensor_parallel_size)),
        Declared(SERVE_CARRIERS["graph_mode"], s.graph_mode, s.graph_mode == "eager", _switch(s.graph_mode == "eager")),
        Declared(SERVE_CARRIERS["max_num_seqs"], "unset (the engine's default)" if s.max_num_seqs is None
                 else str(s.max_num_seqs), s.max_num_seqs is not None, _equals_int(s.max_num_seqs),
                 unset_placeholder="max_num_seqs" if s.max_num_seqs is None else None),
        Declared(SERVE_CARRIERS["max_model_len"], str(campaign.target.max_model_len), True,
                 _equals_int(campaign.target.max_model_len)),
        Declared(SERVE_CARRIERS["speculative"],
                 "none" if spec is None else f"{spec.method} k={spec.num_speculative_tokens}",
                 spec is not None, lambda v: spec is None and not v,
                 why="a literal speculative config cannot be checked against the declared one, nor carry the "
                     "trained draft"),
    ]


def bench_declared(cell: Cell, load: LoadSpec, *, shapes: bool = False) -> list[Declared]:
    """Every load item of a cell, as its bench template must carry it. Always
    carried: the address, the result path, the prompts, num_prompts and the
    window's concurrency; the other load fields unless their value is the
    neutral one any load generator assumes untold (docs/configuration.md).
    `ignore_eos` is its effective value for the prompt source (`shapes`), required
    only when written true: by default each prompt's own value is in the prompts file."""
    levels = cell.concurrency
    eos = load.effective_ignore_eos(shapes=shapes)
    paths = {path: name for name, path in ENDPOINT_PATHS.items()}

    def endpoint(value: str | None) -> bool:  # the path, or the field's own word
        return paths.get(value or "", value) == load.endpoint

    def rate(value: str | None) -> bool:  # vLLM's bench spells "unset" as inf
        if load.request_rate is None:
            return (value or "").strip().lower() == "inf"
        return as_float(value) == load.request_rate

    def never(value: str | None) -> bool:  # no literal can carry it
        return False

    return [
        Declared(BENCH_CARRIERS["address"], "", True, never),
        Declared(BENCH_CARRIERS["result_path"], "", True, never),
        Declared(BENCH_CARRIERS["prompts"], "", True, never),
        Declared(BENCH_CARRIERS["num_prompts"], str(load.num_prompts), True, _equals_int(load.num_prompts)),
        Declared(BENCH_CARRIERS["concurrency"], str(levels) if len(levels) > 1 else str(levels[0]), True,
                 _equals_int(levels[0]) if len(levels) == 1 else never,
                 why="" if len(levels) == 1 else f"the cell measures concurrency levels {levels}, one window each"),
        Declared(BENCH_CARRIERS["warmup_requests"], str(load.warmup_requests), load.warmup_requests > 0,
                 _equals_int(load.warmup_requests)),
        Declared(BENCH_CARRIERS["endpoint"], load.endpoint, load.endpoint != "completions", endpoint),
        Declared(BENCH_CARRIERS["request_rate"],
                 "unset (as fast as the concurrency allows)" if load.request_rate is None else f"{load.request_rate:g}",
                 load.request_rate is not None, rate),
        Declared(BENCH_CARRIERS["burstiness"], f"{load.burstiness:g}",
                 load.request_rate is not None and load.burstiness != 1.0, lambda v: as_float(v) == load.burstiness),
        Declared(BENCH_CARRIERS["max_output_tokens"],
                 "unset (each prompt's own budget)" if load.max_output_tokens is None else str(load.max_output_tokens),
                 load.max_output_tokens is not None,
                 _equals_int(load.max_output_tokens),
                 unset_placeholder="max_output_tokens" if load.max_output_tokens is None else None),
        Declared(BENCH_CARRIERS["ignore_eos"], str(eos).lower(), load.ignore_eos is True, _switch(eos)),
    ]
