"""What fills an operator template: the placeholders each step fills, and their values.

Pure (no I/O). `serve_values` is what the bench plan renders an operator serve
command with; `bench_values` what the bench run renders an operator bench
command with, per measured window. Flag placeholders (`{..._flag}`,
contracts/argv.py) render one complete token or drop their item. The
placeholders a step fills (`SERVE_PLACEHOLDERS`, `BENCH_PLACEHOLDERS`) are
also the only ones `specdec submit` accepts (contracts/templates/check.py).
"""

from __future__ import annotations

import json
import os
from urllib.parse import urlsplit

from contracts.campaign import LoadSpec, ServingConfig

ENDPOINT_PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}

# The placeholders each step fills; any other is refused at submit (it would fail at run time).
SERVE_PLACEHOLDERS: frozenset[str] = frozenset({
    "run_id", "target", "tokenizer", "model", "host", "port", "max_model_len", "dtype", "quantization",
    "quantization_flag", "tensor_parallel_size", "enforce_eager_flag", "max_num_seqs", "max_num_seqs_flag",
    "speculative_config_json", "speculative_config_flag", "training.output",
})
BENCH_PLACEHOLDERS: frozenset[str] = frozenset({
    "run_id", "model", "tokenizer", "host", "port", "base_url", "result_path", "result_dir", "result_filename",
    "prompts_path", "endpoint",
    "num_prompts", "concurrency", "warmup_requests", "request_rate", "burstiness", "max_output_tokens",
    "ignore_eos", "ignore_eos_flag",
})


def serve_values(serving: ServingConfig, *, model: str, max_model_len: int,
                 speculative: dict[str, object] | None) -> dict[str, str]:
    """The serving placeholders of one cell. `speculative` is the resolved
    --speculative-config object (the trained draft filled in). An unset
    max_num_seqs leaves `{max_num_seqs}` without a value (vLLM refuses an
    empty one); `{quantization}` and `{speculative_config_json}` render '' for
    none, which vLLM reads as none."""
    spec_json = json.dumps(speculative, sort_keys=True) if speculative else ""
    values = {
        "model": model,
        "max_model_len": str(max_model_len),
        "dtype": serving.dtype,
        "quantization": serving.quantization or "",
        "quantization_flag": f"--quantization={serving.quantization}" if serving.quantization else "",
        "tensor_parallel_size": str(serving.tensor_parallel_size),
        "enforce_eager_flag": "--enforce-eager" if serving.graph_mode == "eager" else "",
        "max_num_seqs_flag": "" if serving.max_num_seqs is None else f"--max-num-seqs={serving.max_num_seqs}",
        "speculative_config_json": spec_json,
        "speculative_config_flag": f"--speculative-config={spec_json}" if speculative else "",
    }
    if serving.max_num_seqs is not None:
        values["max_num_seqs"] = str(serving.max_num_seqs)
    return values


def bench_values(load: LoadSpec, *, concurrency: int, base_url: str, result_path: str,
                 prompts_path: str) -> dict[str, str]:
    """The load placeholders of one measured window. An unset max_output_tokens
    leaves `{max_output_tokens}` without a value (each prompt's own budget is
    in the prompts file). `load` is the bench plan's, whose ignore_eos the plan
    has decided for the prompt source (Matrix.for_traffic); an undecided one
    renders false."""
    address = urlsplit(base_url)
    values = {
        "base_url": base_url,
        "host": address.hostname or "",
        "port": str(address.port or ""),
        "result_path": result_path,
        "result_dir": os.path.dirname(result_path),
        "result_filename": os.path.basename(result_path),
        "prompts_path": prompts_path,
        "endpoint": ENDPOINT_PATHS[load.endpoint],
        "num_prompts": str(load.num_prompts),
        "concurrency": str(concurrency),
        "warmup_requests": str(load.warmup_requests),
        "request_rate": "inf" if load.request_rate is None else repr(float(load.request_rate)),
        "burstiness": repr(float(load.burstiness)),
        "ignore_eos": "true" if load.ignore_eos else "false",
        "ignore_eos_flag": "--ignore-eos" if load.ignore_eos else "",
    }
    if load.max_output_tokens is not None:
        values["max_output_tokens"] = str(load.max_output_tokens)
    return values
