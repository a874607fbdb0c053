"""Operator serve and bench templates that cannot drop a declared field.

The seed's path for a serving comparison is the operator's own serve and bench
argv. specdec records the declared serving config and load in every trial's
identity, so a template that never passes a declared field would make that
identity a claim nothing backs. Two halves, both pure (no I/O):

- What fills a template: `serve_values` (the bench plan renders an operator
  serve command with it) and `bench_values` (the bench run renders an operator
  bench command per measured window). Flag placeholders (`{..._flag}`,
  contracts/argv.py) render one complete token or drop their item.
- What `specdec submit` refuses, every problem at once (`template_problems`):
  * a serve template (`commands.serve.argv`, or a cell's
    `vllm_sweep.serve_cmd`) that carries neither a placeholder nor an agreeing
    literal flag for a serving field the cell declares (`SERVE_CARRIERS`);
  * a bench template (`commands.bench.argv`, or a cell's `vllm_sweep.bench_cmd`)
    that does not carry a load field whose value is not the neutral one, or
    one of the items every operator bench must get (`BENCH_CARRIERS`);
  * a literal flag whose value is not the declared one (even where the field
    need not be carried: the identity would lie);
  * a value placeholder of an unset field (`{max_num_seqs}` without
    `serving.max_num_seqs`): it has nothing to render;
  * a placeholder the step does not fill (`{corpus}` in a serve command);
  * cells whose bench commands imply different loads.

These checks do not replace the bench-runner's read-back of the engine's
effective config: an operator's wrapper can still receive a flag and drop it.
docs/configuration.md ("Operator argv templates") is the operator's table.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from contracts.argv import ArgvTemplate, render_token, token_placeholders
from contracts.campaign import Campaign, Cell, LoadSpec, Matrix, ServingConfig

# --- what fills a template ------------------------------------------------------------------

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


# --- how a field is carried -----------------------------------------------------------------


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


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _float(text: str | None) -> float | None:
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
    return lambda value: want is not None and _int(value) == want


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
        return _float(value) == load.request_rate

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
                 load.request_rate is not None and load.burstiness != 1.0, lambda v: _float(v) == load.burstiness),
        Declared(BENCH_CARRIERS["max_output_tokens"],
                 "unset (each prompt's own budget)" if load.max_output_tokens is None else str(load.max_output_tokens),
                 load.max_output_tokens is not None,
                 _equals_int(load.max_output_tokens),
                 unset_placeholder="max_output_tokens" if load.max_output_tokens is None else None),
        Declared(BENCH_CARRIERS["ignore_eos"], str(eos).lower(), load.ignore_eos is True, _switch(eos)),
    ]


# --- reading a template ---------------------------------------------------------------------


def _has_placeholder(token: str) -> bool:
    return bool(token_placeholders(token))


def _literal(token: str) -> str:
    return render_token(token, {})  # {{ and }} back to braces; no placeholder is left here


def literals(argv: Sequence[str], carrier: Carrier) -> list[tuple[str, str | None]]:
    """Each literal occurrence of the carrier's flags: (the flag as written, its
    value; None for a switch's on flag, "off" for its off flag). A flag whose
    value holds a placeholder is carried by that placeholder, not a literal."""
    found: list[tuple[str, str | None]] = []
    for i, token in enumerate(argv):
        if carrier.switch:
            if token in carrier.flags:
                found.append((token, None))
            elif token in carrier.off_flags:
                found.append((token, "off"))
            continue
        for flag in carrier.flags:
            if token == flag:
                value = argv[i + 1] if i + 1 < len(argv) else ""
            elif token.startswith(flag + "="):
                value = token[len(flag) + 1:]
            else:
                continue
            if not _has_placeholder(value):
                found.append((flag, _literal(value)))
    return found


def _suggest(carrier: Carrier) -> str:
    first = carrier.placeholders[0]
    if carrier.switch or first.endswith("_flag") or not carrier.flags:
        text = f'"{{{first}}}"'
    else:
        text = f'"{carrier.flags[0]}", "{{{first}}}"'
    others = [f'"{{{p}}}"' for p in carrier.placeholders[1:]]
    return text + (f" (or {' / '.join(others)})" if others else "")


@dataclass(frozen=True)
class Problem:
    """One thing a template lacks or contradicts, for one cell."""

    cell_id: str
    kind: str  # serve or bench
    source: str  # where the template is written
    text: str  # what is wrong and what to do, without the cell


def _either(alternatives: Sequence[str]) -> str:
    if len(alternatives) == 1:
        return f"does not carry {alternatives[0]}"
    if len(alternatives) == 2:
        return f"carries neither {alternatives[0]} nor {alternatives[1]}"
    return f"carries none of {', '.join(alternatives)}"


def field_problems(cell_id: str, kind: str, source: str, template: ArgvTemplate,
                   declared: Sequence[Declared]) -> list[Problem]:
    """What a template lacks or contradicts for one cell."""
    used = template.placeholders()
    problems = []

    def add(text: str) -> None:
        problems.append(Problem(cell_id, kind, source, text))

    for item in declared:
        carrier = item.carrier
        what = f"{carrier.field} = {item.shown}" if item.shown else carrier.field
        found = literals(template.root, carrier)
        wrong = [(flag, value) for flag, value in found if not item.agrees(value)]
        for flag, value in wrong:
            passed = flag if value is None or value == "off" else f"{flag} {value}"
            reason = f" ({item.why})" if item.why else ""
            fix = (f"make them agree, or write {_suggest(carrier)} instead of the literal" if item.required
                   else f"declare the value you pass in {carrier.field}, or drop the literal")
            add(f"passes {passed} but the cell declares {what}{reason}: {fix}")
        if item.unset_placeholder and item.unset_placeholder in used:
            flags = [f'"{{{p}}}"' for p in carrier.placeholders if p.endswith("_flag")]
            instead = f"use {' / '.join(flags)} (nothing when unset)" if flags else "remove the placeholder"
            add(f"uses {{{item.unset_placeholder}}} but {carrier.field} is unset, so it has no value: "
                f"declare {carrier.field}, or {instead}")
        carried = bool(used & set(carrier.placeholders)) or any(item.agrees(value) for _, value in found)
        if item.required and not carried and not wrong:
            alternatives = [f"{{{p}}}" for p in carrier.placeholders]
            if carrier.flags and not item.why:
                alternatives.append(carrier.flags[0] + ("" if carrier.switch else f" {item.shown}"))
            add(f"{_either(alternatives)} for {what}: add {_suggest(carrier)}")
    return problems


def unfilled(cell_id: str, kind: str, source: str, template: ArgvTemplate, filled: frozenset[str]) -> list[Problem]:
    """Placeholders the step never fills: the command would fail when it is rendered."""
    extra = sorted(template.placeholders() - filled)
    if not extra:
        return []
    names = ", ".join("{" + name + "}" for name in extra)
    offered = ", ".join("{" + name + "}" for name in sorted(filled))
    return [Problem(cell_id, kind, source, f"uses {names}, which a {kind} command is not given; it gets: {offered}")]


def _worded(problems: Sequence[Problem]) -> list[str]:
    """One line per problem; a shared template's problem names all its cells once."""
    cells: dict[tuple[str, str, str], list[str]] = {}
    for problem in problems:
        cells.setdefault((problem.kind, problem.source, problem.text), []).append(problem.cell_id)
    lines = []
    for (kind, source, text), ids in cells.items():
        who = f"cell {ids[0]}: its" if len(ids) == 1 else f"cells {', '.join(ids)}: their"
        lines.append(f"{who} {kind} command ({source}) {text}")
    return lines


def _is_option(token: str) -> bool:
    return token.startswith("-") and _float(token) is None  # "-1" is a value, not an option


def options(argv: Sequence[str]) -> dict[str, list[str | None]]:
    """The options of an argv as written: each flag (a token starting with '-')
    and its values (`--flag=V`, or `--flag V` when V is no option; None for a switch)."""
    found: dict[str, list[str | None]] = {}
    for i, token in enumerate(argv):
        if i == 0 or not _is_option(token):
            continue
        flag, eq, value = token.partition("=")
        if not eq:
            following = argv[i + 1] if i + 1 < len(argv) else None
            found.setdefault(flag, []).append(None if following is None or _is_option(following) else following)
        else:
            found.setdefault(flag, []).append(value)
    return found


def _shown_option(values: list[str | None] | None) -> str:
    if values is None:
        return "absent"
    return ", ".join("(set)" if value is None else value for value in values)


def load_problems(benches: Sequence[tuple[str, ArgvTemplate | None]], *, client_processes: int = 1) -> list[str]:
    """Cells whose bench commands imply different loads: some builtin and some
    operator, or operator templates whose options differ (programs and
    positional tokens may differ, e.g. two copies of one wrapper); and
    `matrix.load.client_processes` above 1 beside an operator bench, which
    drives its own load and would never read it."""
    builtin = [cell_id for cell_id, template in benches if template is None]
    operator = [(cell_id, template) for cell_id, template in benches if template is not None]
    if operator and client_processes > 1:
        return [f"matrix.load.client_processes {client_processes} sets how many processes of specdec's builtin "
                f"load generator drive a window, but cells {[cell_id for cell_id, _ in operator]} are measured by "
                "an operator bench command, which drives its own load and never reads it: remove client_processes "
                "(or set 1), or measure with the builtin load generator"]
    if builtin and operator:
        return [f"cells {builtin} are measured by specdec's builtin load generator and cells "
                f"{[cell_id for cell_id, _ in operator]} by an operator bench command: a controlled comparison "
                "measures every cell with one load; give every cell the same bench (commands.bench, no per-cell "
                "vllm_sweep.bench_cmd, or the same bench_cmd on every cell)"]
    if len(operator) < 2:
        return []
    parsed = {cell_id: options(template.root) for cell_id, template in operator}
    flags = sorted({flag for opts in parsed.values() for flag in opts})
    differing = []
    for flag in flags:
        values = {cell_id: opts.get(flag) for cell_id, opts in parsed.items()}
        if len({json.dumps(v) for v in values.values()}) > 1:
            shown = "; ".join(f"{cell_id}: {_shown_option(v)}" for cell_id, v in values.items())
            differing.append(f"{flag} ({shown})")
    if not differing:
        return []
    return ["cells' bench commands imply different loads, they differ in " + ", ".join(differing)
            + ": a controlled comparison measures every cell with one load; use one bench command "
            "(commands.bench) or make these options equal"]


# --- the whole check ------------------------------------------------------------------------


def serve_template(campaign: Campaign, cell: Cell, where: str) -> tuple[ArgvTemplate, str] | None:
    """A cell's operator serve template and where it is written; None for builtin."""
    if cell.vllm_sweep.serve_cmd is not None:
        return cell.vllm_sweep.serve_cmd, f"{where}.vllm_sweep.serve_cmd"
    serve = campaign.commands.serve
    if serve is not None and serve != "builtin":
        return serve.argv, "commands.serve.argv"
    return None


def bench_template(campaign: Campaign, cell: Cell, where: str) -> tuple[ArgvTemplate, str] | None:
    """A cell's operator bench template and where it is written; None for builtin."""
    if cell.vllm_sweep.bench_cmd is not None:
        return cell.vllm_sweep.bench_cmd, f"{where}.vllm_sweep.bench_cmd"
    bench = campaign.commands.bench
    if bench is not None and bench != "builtin":
        return bench.argv, "commands.bench.argv"
    return None


def template_problems(campaign: Campaign, matrix: Matrix, *, cells_at: str = "matrix.cells") -> list[str]:
    """Every reason the campaign's operator templates could drop or contradict a
    declared field, in words (empty when none). `cells_at` names where the
    cells are written (`matrix.cells`, or the matrix file's path)."""
    problems: list[Problem] = []
    serve_filled = SERVE_PLACEHOLDERS if not campaign.shapes_only else SERVE_PLACEHOLDERS - {"training.output"}
    benches: list[tuple[str, ArgvTemplate | None]] = []
    for index, cell in enumerate(matrix.cells):
        where = f"{cells_at}[{index}]"
        serve = serve_template(campaign, cell, where)
        if serve is not None:
            template, source = serve
            problems += unfilled(cell.cell_id, "serve", source, template, serve_filled)
            problems += field_problems(cell.cell_id, "serve", source, template, serve_declared(cell, campaign))
        bench = bench_template(campaign, cell, where)
        if bench is not None:
            template, source = bench
            problems += unfilled(cell.cell_id, "bench", source, template, BENCH_PLACEHOLDERS)
            declared = bench_declared(cell, matrix.load, shapes=campaign.shapes_only)
            problems += field_problems(cell.cell_id, "bench", source, template, declared)
        benches.append((cell.cell_id, None if bench is None else bench[0]))
    return _worded(problems) + load_problems(benches, client_processes=matrix.load.client_processes)
