"""What `specdec submit` refuses in the operator templates, every problem at once.

Pure (no I/O). Reads each cell's serve and bench template (`serve_template`,
`bench_template`) against what the cell declares (contracts/templates/carriers.py)
and the placeholders its step fills (contracts/templates/values.py), words one
line per problem (a shared template's problem names all its cells once), and
adds the cells whose bench commands imply different loads (`load_problems`).
`template_problems` is the whole check.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from contracts.argv import ArgvTemplate, render_token, token_placeholders
from contracts.campaign import Campaign, Cell, Matrix
from contracts.templates.carriers import Carrier, Declared, as_float, bench_declared, serve_declared
from contracts.templates.values import BENCH_PLACEHOLDERS, SERVE_PLACEHOLDERS

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


def field_problems(cell_id: str, kind: str, source: str, template: ArgvTemplate, *,
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


def unfilled(cell_id: str, kind: str, source: str, template: ArgvTemplate, *, filled: frozenset[str]) -> list[Problem]:
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
    return token.startswith("-") and as_float(token) is None  # "-1" is a value, not an option


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
            problems += unfilled(cell.cell_id, "serve", source, template, filled=serve_filled)
            problems += field_problems(cell.cell_id, "serve", source, template, declared=serve_declared(cell, campaign))
        bench = bench_template(campaign, cell, where)
        if bench is not None:
            template, source = bench
            problems += unfilled(cell.cell_id, "bench", source, template, filled=BENCH_PLACEHOLDERS)
            declared = bench_declared(cell, matrix.load, shapes=campaign.shapes_only)
            problems += field_problems(cell.cell_id, "bench", source, template, declared=declared)
        benches.append((cell.cell_id, None if bench is None else bench[0]))
    return _worded(problems) + load_problems(benches, client_processes=matrix.load.client_processes)
