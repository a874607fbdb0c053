"""`specdec gate`: the gate's decision from trial result files, offline (same logic as the gate service).

Exit status 0 on any decision (promote, reject, inconclusive, continue); 2 when
the input cannot be read, the gate spec is invalid, or a --direction contradicts
the metric it follows.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contracts.artifacts.decision import Decision

EXIT_BAD_INPUT = 2
DIRECTION_FLAGS = {"higher-is-better": "higher_is_better", "lower-is-better": "lower_is_better"}


class _Metric(argparse.Action):
    """--objective / --guard: the value, and its place in the command line for a --direction after it."""

    def __call__(self, parser, namespace, values, option_string=None):
        if self.dest == "guard":
            namespace.guard = [*(getattr(namespace, "guard", None) or []), values]
        else:
            setattr(namespace, self.dest, values)
        namespace.metric_order = [*(getattr(namespace, "metric_order", None) or []), values]


class _Direction(argparse.Action):
    """--direction applies to the --objective or --guard just before it."""

    def __call__(self, parser, namespace, values, option_string=None):
        order = getattr(namespace, "metric_order", None) or []
        if not order:
            parser.error("--direction must follow the --objective or --guard it applies to")
        namespace.directions = [*(getattr(namespace, "directions", None) or []), (order[-1], values)]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "gate",
        help="decide promote / reject / inconclusive from trial result JSONs",
        description="Compare candidate trials with baseline trials (vllm bench serve --save-result files, "
        "one per trial) and decide whether a candidate is promoted. Exit 0 on any decision.",
    )
    parser.add_argument(
        "--baseline", action="append", required=True, metavar="GLOB",
        help="Baseline (standing cell) trial files; repeatable."
    )
    parser.add_argument(
        "--candidate",
        action="append",
        required=True,
        metavar="[NAME=]GLOB",
        help="Candidate trial files; repeatable. Without NAME, files are grouped by their identity's cell_id, "
        "else named candidate, candidate-2, ...",
    )
    parser.add_argument(
        "--objective", required=True, action=_Metric, metavar="METRIC[:STAT]", help="The latency objective: ttft, "
        "tpot, itl or e2el, optionally :median (default), :mean or :pNN, e.g. tpot:p99.",
    )  # fmt: skip
    parser.add_argument(
        "--guard", action=_Metric, default=[], metavar="METRIC[:STAT]", help="A metric the candidate must not "
        "worsen beyond the minimum effect (output_throughput, acceptance_rate, acceptance_length, ttft:p99, ...); "
        "repeatable.",
    )  # fmt: skip
    parser.add_argument(
        "--direction", action=_Direction, choices=sorted(DIRECTION_FLAGS), default=[], dest="directions",
        help="Which way is better for the --objective or --guard just before it; a check: a direction that "
        "contradicts the metric (latency is lower-is-better; throughput and acceptance higher-is-better) is refused.",
    )  # fmt: skip
    floors = parser.add_mutually_exclusive_group(required=True)
    floors.add_argument("--acceptance-floor", type=float, metavar="X", help="Minimum acceptance rate in [0, 1].")
    floors.add_argument(
        "--acceptance-length-floor", type=float, metavar="L", help="Minimum mean acceptance length (>= 1)."
    )
    parser.add_argument("--accuracy-floor", type=float, metavar="Y", help="Minimum accuracy or agreement in [0, 1].")
    parser.add_argument(
        "--min-trials", type=int, default=3, metavar="N", help="Trials per arm and level needed (default 3)."
    )
    parser.add_argument(
        "--min-effect", type=float, default=None, metavar="PCT", help="Smallest change that counts, in %% of the "
        "baseline: better only when the whole interval lies beyond it (default: the gate's, 1 %%).",
    )  # fmt: skip
    parser.add_argument(
        "--server-bias", type=float, default=None, metavar="PCT", help="Systematic difference between two servers "
        "of one config, in %%, as measured by A/A campaigns: widens every interval by it (default 0: not measured).",
    )  # fmt: skip
    parser.add_argument(
        "--max-trials", type=int, default=None, metavar="N", help="Sequential rounds: the cap on trials per arm and "
        "level. With fewer, an undecided level is `continue`, and so is the decision while any level could still "
        "change it. Without it the trials at hand are the cap.",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, metavar="DECISION.json", help="Write the decision as JSON here.")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: the gate loads scipy.stats and numpy (~1 s), which building the
    # `specdec` parser (every command) must not wait for.
    from pydantic import ValidationError

    from contracts.campaign import GateSpec
    from services.app.runs.gate import decide_files
    from services.gate import GateError

    optional = {"min_effect_pct": args.min_effect, "server_bias_pct": args.server_bias}
    try:
        spec = GateSpec(
            objective=args.objective,
            acceptance_floor=args.acceptance_floor,
            acceptance_length_floor=args.acceptance_length_floor,
            accuracy_floor=args.accuracy_floor,
            min_trials=args.min_trials,
            guards=args.guard,
            **{k: v for k, v in optional.items() if v is not None},
        )
    except ValidationError as err:
        return _fail("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors()))
    contradiction = direction_problem(args.directions)
    if contradiction:
        return _fail(contradiction)
    try:
        decision = decide_files(args.baseline, args.candidate, spec, max_trials=args.max_trials)
    except GateError as err:
        return _fail(str(err))
    print(render(decision))
    if args.out is not None:
        try:
            args.out.write_text(decision.model_dump_json(indent=2) + "\n")
        except OSError as err:
            return _fail(f"cannot write {args.out}: {err.strerror or err}")
        print(f"decision written to {args.out}")
    return 0


def direction_problem(directions: list[tuple[str, str]]) -> str | None:
    """The first --direction that contradicts the nature of the metric it follows, in one line; None when none does."""
    from contracts.artifacts.trials import DIRECTIONS

    for metric, given in directions:
        name = metric.partition(":")[0]
        nature = DIRECTIONS.get(name)
        if nature is not None and nature != DIRECTION_FLAGS[given]:
            right = next(flag for flag, value in DIRECTION_FLAGS.items() if value == nature)
            return f"--direction {given} contradicts {metric}: {name} is {right}"
    return None


def render(decision: Decision) -> str:
    """The decision and every reason, for a terminal."""
    floors = [
        f"{name} >= {value}"
        for name, value in (
            ("acceptance_rate", decision.gate.acceptance_floor),
            ("acceptance_length", decision.gate.acceptance_length_floor),
            ("accuracy", decision.gate.accuracy_floor),
        )
        if value is not None
    ]
    lines = [
        f"decision: {decision.decision}" + (f" (winner: {decision.winner})" if decision.winner else ""),
        f"objective: {decision.objective} ({decision.direction.replace('_', ' ')}); "
        f"floors: {', '.join(floors) or 'none'}; guards: {', '.join(decision.gate.guards) or 'none'}; "
        f"baseline: {decision.baseline}",
        *(f"- {reason}" for reason in decision.reasons),
    ]
    for cand in decision.candidates:
        lines.append(f"candidate {cand.candidate}: {cand.outcome}")
        lines.extend(f"  - {reason}" for reason in cand.reasons[1:])
        for lvl in cand.levels:
            if lvl.trials_used is not None:
                where = "no limit" if lvl.concurrency is None else f"concurrency {lvl.concurrency}"
                state = f"stopped ({lvl.stopped})" if lvl.stopped else "continues"
                more = (
                    ""
                    if lvl.stopped
                    else (
                        f", about {lvl.trials_expected_more} more expected"
                        if lvl.trials_expected_more is not None
                        else ", not expected to decide by the cap"
                    )
                )
                lines.append(f"  {where}: {lvl.outcome}, {lvl.trials_used} trial(s) per arm, {state}{more}")
    return "\n".join(lines)


def _fail(message: str) -> int:
    print(f"specdec gate: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT
