"""The workflow's canonical matrix file, read into specdec's campaign (docs/configuration.md, "The canonical shape").

The operator's exact serve commands are the source of truth: each is read with vLLM's own parser and
launched as written, but for the tokens specdec must change, each recorded declared -> launched
(`Rewrite`). Pure apart from reading vLLM's parsers and checking which paths exist: no bundle, no Redis.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from contracts.argv import token_placeholders
from contracts.campaign.canonical import CanonicalCell, CanonicalCellRecord, CanonicalFile, CanonicalRecord, Rewrite
from contracts.templates import SERVE_PLACEHOLDERS
from services.app.campaign import canonical_identity
from services.app.campaign.canonical_bench import BenchRead, bench_command
from services.app.campaign.canonical_tokens import literal, sample
from services.shared import vllm_cli
from services.shared.secret_args import MASK, is_secret_flag

# Engine arguments that differ between arms without making the comparison uncontrolled: the speculation
# under test, and where the server listens (specdec assigns those).
_COMPARED_AWAY = frozenset({"speculative_config", "host", "port"})


class CanonicalProblems(Exception):
    """Every reason a canonical file cannot become a campaign."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def translate(raw: dict[str, Any], *, base: Path) -> tuple[dict[str, Any], CanonicalRecord]:
    """specdec's campaign (as a dict, validated by the caller) and the record of what else the file said.
    `base` is where relative paths resolve from (where submit runs). CanonicalProblems names every problem
    found; a ValidationError is the file's shape itself."""
    file = CanonicalFile.model_validate(raw)
    problems: list[str] = []
    own = file.specdec
    max_model_len = int((own.get("target") or {}).get("max_model_len") or 2048)
    baseline = _baseline(file, problems)
    cells: list[dict[str, Any]] = []
    records: list[CanonicalCellRecord] = []
    benches: dict[str, BenchRead] = {}
    for cell in file.cells:
        where = f"cells[{cell.cell_id}]"
        role = "standing" if cell.cell_id == baseline else "candidate"
        try:
            serving, template, record, bench = _cell(cell, role, where=where, base=base,
                                                     max_model_len=max_model_len)
        except (vllm_cli.CommandRefused, vllm_cli.VllmUnavailable) as exc:
            problems.append(str(exc))
            continue
        except CanonicalProblems as exc:
            problems.extend(exc.problems)
            continue
        records.append(record)
        if bench is not None:
            benches[cell.cell_id] = bench
        cells.append({
            "cell_id": cell.cell_id, "role": role, "hardware": cell.hardware, "concurrency": cell.concurrencies,
            "regime": cell.regime, "trials": cell.trials, "node": cell.node, "source_revision": cell.source_revision,
            "env": list(cell.env), "serving": serving, "vllm_sweep": {"serve_cmd": template,
                                               **({"bench_cmd": bench.template} if bench is not None else {})},
        })
    exploratory = bool(own.get("exploratory", False))
    if not exploratory:
        problems += _uncontrolled(records, baseline)
    load, load_problems = _shared_load(file, own, benches)
    problems += load_problems
    if problems:
        raise CanonicalProblems(problems)
    data = {key: value for key, value in own.items() if key not in ("load", "exploratory")}
    data["family"] = file.family
    data.setdefault("version", 1)
    commands = dict(data.get("commands") or {})
    # The cells bring their own serve commands; the bench and the evaluation are specdec's unless the
    # operator names their own (a canonical cell's bench_cmd is refused until it can be read: _cell).
    for key in ("serve", "bench", "eval"):
        commands.setdefault(key, "builtin")
    data["commands"] = commands
    if "standing" not in data:
        standing = next((c for c in cells if c["role"] == "standing"), None)
        data["standing"] = standing["serving"]["speculative"] if standing else None
    data["matrix"] = {"cells": cells, "load": load, "exploratory": exploratory}
    canonical = CanonicalRecord(name=file.name, description=file.description, experiment_id=file.experiment_id,
                                evidence_bundle_path=file.evidence_bundle_path, provenance=file.provenance,
                                comparator_baseline=baseline or "", cells=records)
    return data, canonical


def _shared_load(file: CanonicalFile, own: dict[str, Any], benches: dict[str, BenchRead]
                 ) -> tuple[dict[str, Any], list[str]]:
    """matrix.load: the file's `load`, or what the cells' bench commands declare, which must be one load."""
    if not benches:
        return own.get("load") or {}, []
    problems = []
    without = [cell.cell_id for cell in file.cells if cell.cell_id not in benches]
    if without:
        problems.append(f"cells {without} have no bench_cmd while {sorted(benches)} do: a controlled comparison runs "
                        "one bench on every cell; give each cell the same `vllm bench serve` command")
    if "load" in own:
        problems.append("load: the cells' bench commands declare the load; remove `load` (it would only disagree)")
    first_id, first = next(iter(benches.items()))
    for cell_id, bench in benches.items():
        differ = sorted(k for k in set(first.comparable) | set(bench.comparable)
                        if first.comparable.get(k) != bench.comparable.get(k))
        if differ:
            shown = ", ".join(f"{k}: {first.comparable.get(k)!r} vs {bench.comparable.get(k)!r}" for k in differ)
            problems.append(f"cells[{cell_id}].vllm_sweep.bench_cmd drives another load than cells[{first_id}]'s "
                            f"({shown}): every cell must share the load")
    return first.load, problems


def _baseline(file: CanonicalFile, problems: list[str]) -> str | None:
    ids = [cell.cell_id for cell in file.cells]
    named = file.campaign.comparator_baseline
    if named:
        if named not in ids:
            problems.append(f"campaign.comparator_baseline {named!r} is not a cell_id of the file ({', '.join(ids)})")
            return None
        return named
    if len(ids) == 2:
        return ids[0]  # the previous cell of the only candidate
    problems.append(
        f"campaign.comparator_baseline is empty, which compares each cell with the previous one ({' -> '.join(ids)}); "
        "specdec compares every candidate with one baseline, the standing config: name it, e.g. "
        f"comparator_baseline: {ids[0]}")
    return None


def _cell(cell: CanonicalCell, role: str, *, where: str, base: Path, max_model_len: int
          ) -> tuple[dict[str, Any], list[str], CanonicalCellRecord, BenchRead | None]:
    """The cell's typed serving config, serve template and record, and its bench command as read (None
    without one)."""
    serving, template, record = _serve(cell, role, where=where, base=base, max_model_len=max_model_len)
    if cell.vllm_sweep.bench_cmd is None:
        return serving, template, record, None
    try:
        bench = bench_command(cell, where=f"{where}.vllm_sweep.bench_cmd", base=base)
    except ValueError as exc:
        raise CanonicalProblems([str(exc)]) from None
    return serving, template, record.model_copy(update=bench.record), bench


def _serve(cell: CanonicalCell, role: str, *, where: str, base: Path, max_model_len: int
           ) -> tuple[dict[str, Any], list[str], CanonicalCellRecord]:
    declared = vllm_cli.split_command(cell.vllm_sweep.serve_cmd, where=f"{where}.vllm_sweep.serve_cmd")
    unfilled = sorted({name for token in declared for name in token_placeholders(literal(token))}
                      - SERVE_PLACEHOLDERS)
    if unfilled:
        raise CanonicalProblems([f"{where}.vllm_sweep.serve_cmd uses {', '.join('{' + n + '}' for n in unfilled)}, "
                                 "which the serve step does not fill: write the value"])
    identity = {"model": cell.model, "hardware": cell.hardware, "quant": cell.quant,
                "tensor_parallel": cell.tensor_parallel, "parallel_strategy": cell.parallel_strategy,
                "max_num_batched_tokens": cell.max_num_batched_tokens, "extras": cell.extras}
    if not vllm_cli.is_vllm_serve(declared):
        if cell.serving is None:
            raise CanonicalProblems([
                f"{where}.vllm_sweep.serve_cmd {declared[0]!r} is not `vllm serve`, so vLLM's parser cannot read what "
                "it serves: declare the cell's serving config in specdec's keys (`serving:`, as "
                "matrix.cells[].serving), which its command must then carry"])
        record = CanonicalCellRecord(cell_id=cell.cell_id, role=role, notes=cell.notes, identity=identity,
                                     serve_cmd=declared, parsed_by_vllm=False, engine_args={}, rewrites=[])
        return cell.serving, [literal(token) for token in declared], record
    if cell.serving is not None:
        raise CanonicalProblems([
            f"{where}.serving: the cell's `vllm serve` command declares what it serves (read by vLLM's parser); a "
            "second declaration could only disagree with it: remove serving"])
    parsed = vllm_cli.parse_serve([sample(token) for token in declared], where=f"{where}.vllm_sweep.serve_cmd")
    serving, problems, unchecked = _serving(parsed, cell, where=where, max_model_len=max_model_len, base=base)
    template, rewrites = _launch_template(declared, parsed, base=base)
    if problems:
        raise CanonicalProblems(problems)
    engine_args = {name: value for name, value in parsed.declared().items() if name not in ("host", "port")}
    record = CanonicalCellRecord(cell_id=cell.cell_id, role=role, notes=cell.notes, identity=identity,
                                 serve_cmd=declared, parsed_by_vllm=True, engine_args=engine_args, rewrites=rewrites,
                                 unchecked_labels=unchecked)
    return serving, template, record


def _serving(parsed: vllm_cli.Parsed, cell: CanonicalCell, *, where: str, max_model_len: int, base: Path
             ) -> tuple[dict[str, Any], list[str], dict[str, str]]:
    """specdec's typed serving config from what vLLM read; the identity labels the command contradicts, and those
    left unchecked here (label -> why)."""
    args, problems = parsed.args, []
    model = parsed.model
    if model is None:
        problems.append(f"{where}.vllm_sweep.serve_cmd names no model (`vllm serve MODEL` or --model): vLLM would "
                        "serve its own default model")
    spec = args.get("speculative_config")
    serving = {
        "model": model, "dtype": args.get("dtype") or "auto", "quantization": args.get("quantization"),
        "tensor_parallel_size": args.get("tensor_parallel_size") or 1,
        "graph_mode": "eager" if args.get("enforce_eager") else "graph", "max_num_seqs": args.get("max_num_seqs"),
        "speculative": dict(spec) if spec else None,
    }
    given_len = args.get("max_model_len")
    if given_len is not None and int(given_len) != max_model_len:
        problems.append(f"{where}.vllm_sweep.serve_cmd serves --max-model-len {given_len}, but target.max_model_len is "
                        f"{max_model_len}: specdec sizes prompts by the target's; make them agree")
    # tensor_parallel: the command's, else vLLM's default (1), known here. quant and max_num_batched_tokens left
    # to vLLM or the checkpoint: read from the checkpoint where it is here, else unchecked (canonical_identity.py).
    if cell.tensor_parallel is not None and cell.tensor_parallel != serving["tensor_parallel_size"]:
        problems.append(f"{where}.tensor_parallel is {cell.tensor_parallel!r}, but its serve command runs "
                        f"{serving['tensor_parallel_size']!r}: the identity label must say what is served")
    unchecked: dict[str, str] = {}
    for found, left in (canonical_identity.quant_problems(cell, args, model, where=where, base=base),
                        canonical_identity.batched_tokens_problems(cell, args, where=where)):
        problems += found
        unchecked.update(left)
    return serving, problems, unchecked


def _launch_template(declared: list[str], parsed: vllm_cli.Parsed, *, base: Path
                     ) -> tuple[list[str], list[Rewrite]]:
    """The argv template launched: the operator's tokens (literal braces kept literal), with the address the
    server binds and a relative model path changed, each change recorded."""
    template = [literal(token) for token in declared]
    rewrites: list[Rewrite] = []
    model = parsed.model
    for name, placeholder in (("--host", "{host}"), ("--port", "{port}")):
        at = vllm_cli.option_value(declared, name)
        if at is None:
            template += [name, placeholder]
            rewrites.append(Rewrite(position=len(declared), declared=None, launched=f"{name} {placeholder}",
                                    why=f"the server must listen where specdec reaches it; the command sets no {name}"))
        else:
            index, inline = at
            launched = f"{name}={placeholder}" if inline else placeholder
            if template[index] != launched:
                rewrites.append(Rewrite(position=index, declared=declared[index], launched=launched,
                                        why=f"specdec assigns {name[2:]} per launch (a free port, the bind address "
                                        "of the executor)"))
                template[index] = launched
    if model and not Path(model).is_absolute() and (base / model).exists():
        absolute = str((base / model).resolve())
        for index, token in enumerate(declared):
            if token == model:
                rewrites.append(Rewrite(position=index, declared=token, launched=absolute,
                                        why="a relative model path resolves from where submit ran, so services "
                                        "started elsewhere serve the same files"))
                template[index] = literal(absolute)
            elif token == f"--model={model}":
                rewrites.append(Rewrite(position=index, declared=token, launched=f"--model={absolute}",
                                        why="a relative model path resolves from where submit ran"))
                template[index] = literal(f"--model={absolute}")
    return template, rewrites


def _uncontrolled(records: list[CanonicalCellRecord], baseline: str | None) -> list[str]:
    """Arms whose engine arguments differ in anything but the speculation: not a controlled comparison."""
    by_id = {record.cell_id: record for record in records}
    base = by_id.get(baseline or "")
    if base is None or not base.parsed_by_vllm:
        return []
    problems = []
    compared = {k: v for k, v in base.engine_args.items() if k not in _COMPARED_AWAY}
    for record in records:
        if record.cell_id == base.cell_id or not record.parsed_by_vllm:
            continue
        mine = {k: v for k, v in record.engine_args.items() if k not in _COMPARED_AWAY}
        differ = sorted(k for k in set(compared) | set(mine) if compared.get(k) != mine.get(k))
        # The served model is compared by the path each names (one relative, one absolute is the same model).
        differ = [k for k in differ if not (k in ("model_tag", "model") and _same_path(compared.get(k), mine.get(k)))]
        if differ:
            # A credential (hf_token, api_key) is named, never quoted.
            shown = ", ".join(f"{k}: {_value(k, compared.get(k))} vs {_value(k, mine.get(k))}" for k in differ)
            problems.append(f"cells[{record.cell_id}] differs from the baseline {base.cell_id} in more than its "
                            f"speculation ({shown}): not a controlled comparison; make the commands agree, or set "
                            "exploratory: true for a DRAFT")
    return problems


def _value(key: str, value: Any) -> str:
    return MASK if value is not None and is_secret_flag(key) else repr(value)


def _same_path(a: Any, b: Any) -> bool:
    return isinstance(a, str) and isinstance(b, str) and os.path.normpath(a) == os.path.normpath(b)


def validation_problems(exc: ValidationError) -> list[str]:
    """A canonical file's shape errors in submit's words."""
    found = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"] if not str(p).startswith("function-")) or "(file)"
        found.append(f"invalid: {where}: {error['msg'].removeprefix('Value error, ')}")
    return found
