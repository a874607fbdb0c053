"""A canonical cell's `vllm bench serve` command: read with vLLM's bench parser, run as declared.

What it sets is the cell's declared load, and every cell's must be the same. specdec changes only the
tokens that say where (address, concurrency, result file) and the percentiles the gate needs, each
change recorded declared -> launched (docs/configuration.md, "The canonical shape").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.campaign.canonical import CanonicalCell, Rewrite
from services.app.campaign.canonical_tokens import literal, sample
from services.shared import vllm_cli

# What the gate reads from a vLLM result: the four latencies, their medians and every percentile asked for.
PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")
PERCENTILES = ("50", "90", "99")
ENDPOINTS = {"/v1/completions": "completions", "/v1/chat/completions": "chat"}
# The output length each vLLM dataset reads its own option for.
_OUTPUT_LEN = {"random": "random_output_len", "custom": "custom_output_len", "sharegpt": "sharegpt_output_len",
               "spec_bench": "spec_bench_output_len", "prefix_repetition": "prefix_repetition_output_len",
               "hf": "hf_output_len"}
# Arguments that differ between cells without changing the load: where, which levels, which file, which model
# name the cell's server answers to.
_NOT_LOAD = frozenset({"base_url", "host", "port", "max_concurrency", "model", "tokenizer", "save_result",
                       "result_dir", "result_filename", "percentile_metrics", "metric_percentiles",
                       "served_model_name"})


@dataclass(frozen=True)
class BenchRead:
    """One cell's bench command as specdec runs it, and what it declares."""

    template: list[str]  # the argv template run per window
    load: dict[str, Any]  # matrix.load, as the command declares it
    comparable: dict[str, Any]  # every load argument it sets (what every cell must share)
    record: dict[str, Any]  # the CanonicalCellRecord fields of the bench


def bench_command(cell: CanonicalCell, *, where: str, base: Path) -> BenchRead:
    """Read `vllm_sweep.bench_cmd`; CommandRefused or ValueError name what cannot be run as declared."""
    declared = vllm_cli.split_command(cell.vllm_sweep.bench_cmd or [], where=where)
    if not vllm_cli.is_vllm_bench(declared):
        raise vllm_cli.CommandRefused(
            f"{where} {declared[0]!r} is not `vllm bench serve`, which is the bench a canonical cell runs: write the "
            "operator's `vllm bench serve` command, or leave bench_cmd out for specdec's own load generator")
    parsed = vllm_cli.parse_bench([sample(token) for token in declared], where=where)
    args = parsed.args
    problems = []
    endpoint = ENDPOINTS.get(str(args.get("endpoint")))
    if endpoint is None:
        problems.append(f"{where} sends to {args.get('endpoint')!r}: specdec measures /v1/completions or "
                        "/v1/chat/completions")
    levels = cell.concurrencies
    template = [literal(token) for token in declared]
    rewrites: list[Rewrite] = []

    def replace(flag: str, placeholder: str, why: str, *, append: bool = True) -> None:
        at = vllm_cli.option_value(declared, flag)
        if at is None:
            if append:
                template.extend([flag, placeholder])
                rewrites.append(Rewrite(position=len(declared), declared=None, launched=f"{flag} {placeholder}",
                                        why=why))
            return
        index, inline = at
        launched = f"{flag}={placeholder}" if inline else placeholder
        if template[index] != launched:
            rewrites.append(Rewrite(position=index, declared=declared[index], launched=launched, why=why))
            template[index] = launched

    address = "specdec starts each cell's server on a port of its own and points the bench at it"
    if vllm_cli.option_value(declared, "--base-url") is not None:
        replace("--base-url", "{base_url}", address)
    else:
        replace("--host", "{host}", address, append=False)
        replace("--port", "{port}", address, append=False)
        if vllm_cli.option_value(declared, "--host") is None and vllm_cli.option_value(declared, "--port") is None:
            replace("--base-url", "{base_url}", address)
    given = args.get("max_concurrency")
    literal_levels = vllm_cli.option_value(
        declared, "--max-concurrency"
    ) is not None and "{concurrency}" not in " ".join(declared)
    if literal_levels and levels != [given]:
        problems.append(f"{where} runs --max-concurrency {given}, but the cell measures concurrency levels {levels}, "
                        "one window each: write --max-concurrency {concurrency}")
    replace("--max-concurrency", "{concurrency}", "one window per concurrency level of the cell")
    if "--save-result" not in declared:
        template.append("--save-result")
        rewrites.append(Rewrite(position=len(declared), declared=None, launched="--save-result",
                                why="specdec reads the window's result file"))
    replace("--result-dir", "{result_dir}", "the result goes into the trial's folder of the run's bundle")
    replace("--result-filename", "{result_filename}", "one result file per window")
    for flag, wanted, default in (("--percentile-metrics", PERCENTILE_METRICS, None),
                                  ("--metric-percentiles", PERCENTILES, "99")):
        value = args.get(flag[2:].replace("-", "_"))
        have = [v for v in str(value or default or "").split(",") if v]
        union = ",".join(dict.fromkeys([*have, *wanted]))
        if union != ",".join(have) or value is None:
            replace(flag, union, "the gate's objective and guards read these latencies and percentiles (median "
                    "and p99 included), so none is missing after hours of serving")
    if args.get("model") and not Path(str(args["model"])).is_absolute() and (base / str(args["model"])).exists():
        replace("--model", literal(str((base / str(args["model"])).resolve())),
                "a relative model path resolves from where submit ran, as the serve command's does")
    if problems:
        raise ValueError("; ".join(problems))
    rate = args.get("request_rate")
    output_option = _OUTPUT_LEN.get(str(args.get("dataset_name")), "output_len")
    load = {
        "endpoint": endpoint, "num_prompts": int(args["num_prompts"]), "warmup_requests": int(args["num_warmups"]),
        "request_rate": None if rate is None or math.isinf(float(rate)) else float(rate),
        "burstiness": float(args["burstiness"]), "max_output_tokens": args.get(output_option),
        "ignore_eos": bool(args.get("ignore_eos")),
    }
    comparable = {name: vllm_cli._plain(value) for name, value in args.items() if name not in _NOT_LOAD}
    return BenchRead(template=template, load=load, comparable=comparable, record={
        "bench_cmd": declared, "bench_args": parsed.declared(), "bench_rewrites": rewrites,
        "bench_dataset": dataset_label(args)})


def dataset_label(args: dict[str, Any]) -> str:
    """The workload shape a bench's own dataset gives: `vllm-bench:<dataset>` and the lengths it sets."""
    name = str(args.get("dataset_name"))
    if name == "random":
        return f"vllm-bench:random(in={args.get('random_input_len')},out={args.get('random_output_len')})"
    path = args.get("dataset_path")
    return f"vllm-bench:{name}" + (f"({Path(str(path)).name})" if path else "")
