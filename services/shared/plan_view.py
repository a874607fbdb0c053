"""A stored plan as a reviewer reads it: one screen per bench cell, one line per command.

What `specdec <step> plan RUN`, the MCP tool plan_show and the report show
(docs/configuration.md#what-a-plan-display-shows). Pure and below the steps, so the CLI and the
publisher render alike; every value is masked (services/shared/secret_args.py), and a plan of an
older format, missing a key, still renders what it has.
"""

from __future__ import annotations

import json
import shlex
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from services.shared.formatting import concurrency
from services.shared.secret_args import mask_document

INDENT = "  "
# Identity labels and the plan's sentences wrap at this width; a command is never wrapped (one line to copy).
WIDTH = 110


def plan_lines(step: str, document: Mapping[str, Any]) -> list[str]:
    """The plan of `step` ("bench" or "training") as lines, without line ends."""
    plan = mask_document(dict(document))
    return _bench(plan) if step == "bench" else _training(plan)


def command(argv: Any) -> str:
    """An argv as one shell-quoted line; anything else (a "builtin" marker) as written."""
    if isinstance(argv, list) and all(isinstance(token, str) for token in argv):
        return shlex.join(argv)
    return str(argv)


# --- bench ---------------------------------------------------------------------------


def _bench(plan: Mapping[str, Any]) -> list[str]:
    cells = [cell for cell in plan.get("cells") or [] if isinstance(cell, Mapping)]
    launches = [launch for launch in plan.get("launches") or [] if isinstance(launch, Mapping)]
    lines = [f"executor: {plan.get('executor', '?')}; {_count(len(cells), 'cell')} on "
             f"{_count(len(launches), 'server launch', 'server launches')}; "
             + ("DRAFT: the matrix is exploratory, every result is a DRAFT" if plan.get("draft") else "results final")]
    lines.append(
        "commands: as launched, one line each (run as a list, no shell; a server's {port} is picked at launch)"
    )
    lines += _wrapped("load: ", _load(plan))
    rounds = plan.get("rounds")
    if isinstance(rounds, Mapping):
        lines += _wrapped("rounds: ", _rounds(rounds))
    blocks = [b for b in plan.get("blocks") or [] if isinstance(b, Mapping)]
    if blocks:
        lines.append("blocks (block b measures trial b of each cell, in this order):")
        lines += [f"{INDENT}{b.get('index')}: {', '.join(map(str, b.get('order') or []))}" for b in blocks]
    for cell in cells:
        lines.append("")
        lines += cell_lines(cell, launches, plan.get("executor"))
    return lines + _closing(plan, "bench", "job scripts, manifests, the stopping rule")


def cell_lines(cell: Mapping[str, Any], launches: Sequence[Mapping[str, Any]], executor: Any) -> list[str]:
    """One cell: what it is, its identity, the command launched with its changes, bench, eval and its launches."""
    cell_id = cell.get("cell_id")
    lines = [f"cell {cell_id}: {cell.get('role', '?')}, {cell.get('regime', '?')}, on node {cell.get('node', '?')}"]
    levels = ", ".join(concurrency(level) for level in cell.get("concurrency") or [])
    lines.append(f"{INDENT}trials: {cell.get('trials', '?')} per concurrency level; concurrency: {levels or '?'}")
    identity = cell.get("identity")
    if isinstance(identity, Mapping) and identity:
        labels = ", ".join(f"{key}={_value(value)}" for key, value in identity.items())
        lines += _wrapped(f"{INDENT}identity: ", labels, indent=INDENT * 3)
    for name, why in (cell.get("unchecked_labels") or {}).items():
        lines.append(f"{INDENT}label {name} not checked before the run: {why}")
    changes = [c for c in cell.get("launch_changes") or [] if isinstance(c, Mapping)]
    source = cell.get("serve_source", "builtin")
    lines.append(f"{INDENT}serve ({'the operator' if source == 'operator' else 'specdec'}'s): "
                 f"{command(cell.get('serve_argv'))}")
    if cell.get("declared_serve_argv"):
        lines.append(f"{INDENT * 2}as declared: {command(cell['declared_serve_argv'])}")
    lines += _changes(changes, "serve")
    for what in ("bench", "eval"):
        value = cell.get(what, "builtin")
        lines.append(f"{INDENT}{what}: " + (BUILTIN[what] if value == "builtin" else command(value)))
        if what == "bench":
            lines += _changes(changes, "bench")
    if cell.get("env"):
        lines.append(f"{INDENT}env (names passed from the bench-runner's environment): {', '.join(cell['env'])}")
    lines += _launches(cell_id, launches, executor)
    return lines


BUILTIN = {"bench": "builtin load generator", "eval": "builtin agreement with the standing cell"}


def _changes(changes: Sequence[Mapping[str, Any]], what: str) -> list[str]:
    """Each token of the operator's `what` command launched other than declared: position, declared -> launched, why."""
    lines = []
    for change in changes:
        if change.get("command", "serve") != what:
            continue
        declared = change.get("declared")
        before = "(appended)" if declared is None else shlex.quote(str(declared))
        lines.append(f"{INDENT * 2}changed [{change.get('position', '?')}]: {before} -> {change.get('launched')}"
                     f" ({change.get('why', 'no reason recorded')})")
    return lines


def _launches(cell_id: Any, launches: Sequence[Mapping[str, Any]], executor: Any) -> list[str]:
    """The cell's server starts, by their place in the plan's order; on a scheduler, what each one submits."""
    mine = [(index, launch) for index, launch in enumerate(launches, start=1) if launch.get("cell_id") == cell_id]
    if not mine:
        return [f"{INDENT}launches: none"]
    if executor not in ("slurm", "kubernetes"):
        starts = "; ".join(f"#{index} of {len(launches)} ({_trials(launch.get('trials'))})"
                           for index, launch in mine)
        return [f"{INDENT}launches: {starts}"]
    lines = []
    for index, launch in mine:
        placed = launch.get(executor) or {}
        submit = placed.get("sbatch_argv") if executor == "slurm" else placed.get("apply_argv")
        lines.append(f"{INDENT}launch #{index} of {len(launches)} ({_trials(launch.get('trials'))}): "
                     f"{command(submit) if submit else '(no submission recorded)'}")
    return lines


def _trials(trials: Any) -> str:
    """The trials a launch measures: a range where they run on (trials 0-3), else listed."""
    values = [t for t in trials or [] if isinstance(t, int)]
    if len(values) > 2 and values == list(range(values[0], values[-1] + 1)):
        return f"trials {values[0]}-{values[-1]}"
    if not values:
        return "no trials"
    return ("trial " if len(values) == 1 else "trials ") + ", ".join(map(str, values))


def _section(mapping: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """`mapping[key]` where it is a mapping, else empty."""
    value = mapping.get(key)
    return value if isinstance(value, Mapping) else {}


def _load(plan: Mapping[str, Any]) -> str:
    load = _section(plan, "load")
    prompts = _section(plan, "prompts")
    parts = [f"{load.get('endpoint', '?')} endpoint, {load.get('num_prompts', '?')} prompts per window"]
    origin = prompts.get("workload_shape") or prompts.get("origin")
    if origin:
        distinct = f", {prompts['distinct_prompts']} distinct" if prompts.get("distinct_prompts") is not None else ""
        parts.append(f"from {origin}{distinct} (prompts sha256 {str(prompts.get('sha256', '?'))[:12]})")
    if load.get("max_output_tokens") is not None:
        parts.append(f"up to {load['max_output_tokens']} output tokens")
    if load.get("request_rate") is not None:
        parts.append(f"{load['request_rate']} requests/s")
    parts.append(f"{load.get('warmup_requests', '?')} warm-up requests before every window")
    if plan.get("readiness_timeout_s") is not None:
        parts.append(f"a server must answer /health within {plan['readiness_timeout_s']:g} s")
    return ", ".join(parts)


def _rounds(rounds: Mapping[str, Any]) -> str:
    expected = [f"c={concurrency(row.get('concurrency'))}: "
                + ("unknown (no earlier trials)" if row.get("expected_trials_per_arm") is None
                   else str(row.get("expected_trials_per_arm")))
                for row in rounds.get("noise") or [] if isinstance(row, Mapping)]
    text = (f"{rounds.get('min_trials')} to {rounds.get('max_trials')} trials per arm and level, looked at after "
            f"every block on {rounds.get('objective')} (minimum effect {rounds.get('min_effect_pct')} %)")
    return text + (f"; expected trials per arm {', '.join(expected)}" if expected else "")


# --- training ------------------------------------------------------------------------


def _training(plan: Mapping[str, Any]) -> list[str]:
    lines = [f"executor: {plan.get('executor', '?')} on node {plan.get('node', '?')}; stopped after "
             f"{_seconds(plan.get('timeout_s'))} (SIGTERM, then SIGKILL {_seconds(plan.get('kill_grace_s'))} later)"]
    launch = plan.get("launch")
    reuse = plan.get("reuse")
    if isinstance(launch, Mapping):
        lines += launch_lines(launch)
    elif isinstance(reuse, Mapping):
        lines.append(f"no launch: the draft of run {reuse.get('from_run', '?')} is copied (reuse)")
    else:
        lines.append("no launch recorded")
    inputs = _section(plan, "inputs")
    if inputs:
        corpus = _section(inputs, "corpus")
        lines.append(f"inputs: {inputs.get('train_records', '?')} train and {inputs.get('heldout_records', '?')} "
                     f"heldout records (corpus sha256 {str(corpus.get('sha256', '?'))[:12]}); target "
                     f"{plan.get('target', '?')}, tokenizer {plan.get('tokenizer', '?')}")
    if plan.get("output_dir"):
        lines.append(f"output: {plan['output_dir']} (the draft: {plan.get('checkpoint_dir', plan['output_dir'])})")
    probes = plan.get("probes")
    if isinstance(probes, Mapping):
        builtin = ", ".join(probes.get("builtin") or {}) or "none"
        lines.append(f"probes: {builtin} (built in)")
        if probes.get("operator_argv"):
            lines.append(f"{INDENT}operator's probe: {command(probes['operator_argv'])}")
    if plan.get("reuse_note"):
        lines += _wrapped("reuse: ", str(plan["reuse_note"]))
    progress = plan.get("progress")
    if isinstance(progress, Mapping):
        form = str(progress.get("format") or "?") + (f" {progress['pattern']!r}" if progress.get("pattern") else "")
        lines.append(f"progress: read from the trainer's output lines ({form}), relayed as step.progress")
    return lines + _closing(plan, "training", "job script or manifest, stop conditions, input key")


def _closing(plan: Mapping[str, Any], step: str, kept: str) -> list[str]:
    """Every plan's last lines: what it changes on the cluster, its cleanup, and where the rest is."""
    return ["", *_sentences("deployment changes:", plan.get("deployment_changes")),
            *_sentences("cleanup:", plan.get("cleanup")),
            f"the whole plan ({kept}): specdec {step} plan {plan.get('run_id', 'RUN_ID')} --json"]


def launch_lines(launch: Mapping[str, Any]) -> list[str]:
    """The trainer's launch: the argv it runs as one line, and on a scheduler what submits it."""
    kind = launch.get("kind", "local")
    lines = [f"launch ({kind}): {command(launch.get('argv'))}"]
    if kind == "local":
        lines.append(f"{INDENT}in {launch.get('cwd', '?')}, with "
                     + ", ".join(f"{k}={v}" for k, v in (launch.get("env_added") or {}).items()))
    elif kind == "slurm":
        lines.append(
            f"{INDENT}submitted as: {command(launch.get('sbatch_argv'))} (its job script execs the line above)"
        )
    elif kind == "kubernetes":
        lines.append(f"{INDENT}the container's command, in a Job the operator applies: "
                     f"{command(launch.get('apply_argv'))}")
    if launch.get("env"):
        lines.append(f"{INDENT}env (names passed from the service's environment): {', '.join(launch['env'])}")
    return lines


# --- text ----------------------------------------------------------------------------


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _seconds(value: Any) -> str:
    return f"{value:g} s" if isinstance(value, (int, float)) else "?"


def _wrapped(head: str, text: str, *, indent: str = INDENT) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=head, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False) or [head.rstrip()]


def _sentences(title: str, items: Any) -> list[str]:
    if not items:
        return [f"{title} none"]
    lines = [title]
    for item in items if isinstance(items, list) else [items]:
        lines += _wrapped(f"{INDENT}- ", str(item), indent=INDENT * 2)
    return lines
