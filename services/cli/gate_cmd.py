"""`specdec gate`: the gate's decision from trial result files, offline (same logic as the gate service).

Exit status 0 on any decision (promote, reject, inconclusive); 2 when the input
cannot be read or the gate spec is invalid.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contracts.decision import Decision

EXIT_BAD_INPUT = 2


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "gate",
        help="decide promote / reject / inconclusive from trial result JSONs",
        description="Compare candidate trials with baseline trials (vllm bench serve --save-result files, "
        "one per trial) and decide whether a candidate is promoted. Exit 0 on any decision.",
    )
    parser.add_argument(
        "--baseline", action="append", required=True, metavar="GLOB", help="Baseline (standing cell) trial files; repeatable."
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
        "--objective", required=True, metavar="METRIC[:STAT]", help="The latency objective: ttft, tpot, itl or "
        "e2el, optionally :median (default), :mean or :pNN, e.g. tpot:p99.",
    )  # fmt: skip
    parser.add_argument(
        "--guard", action="append", default=[], metavar="METRIC[:STAT]", help="A metric the candidate must not "
        "worsen beyond the noise (output_throughput, acceptance_rate, acceptance_length, ttft:p99, ...); repeatable.",
    )  # fmt: skip
    floors = parser.add_mutually_exclusive_group(required=True)
    floors.add_argument("--acceptance-floor", type=float, metavar="X", help="Minimum acceptance rate in [0, 1].")
    floors.add_argument("--acceptance-length-floor", type=float, metavar="L", help="Minimum mean acceptance length (>= 1).")
    parser.add_argument("--accuracy-floor", type=float, metavar="Y", help="Minimum accuracy or agreement in [0, 1].")
    parser.add_argument("--min-trials", type=int, default=3, metavar="N", help="Trials per arm and level needed (default 3).")
    parser.add_argument("--out", type=Path, metavar="DECISION.json", help="Write the decision as JSON here.")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: the gate loads scipy.stats and numpy (~1 s), which building the
    # `specdec` parser (every command) must not wait for.
    from pydantic import ValidationError

    from contracts.campaign import GateSpec
    from services.app.gate import decide_files
    from services.gate import GateError

    try:
        spec = GateSpec(
            objective=args.objective,
            acceptance_floor=args.acceptance_floor,
            acceptance_length_floor=args.acceptance_length_floor,
            accuracy_floor=args.accuracy_floor,
            min_trials=args.min_trials,
            guards=args.guard,
        )
    except ValidationError as err:
        return _fail("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors()))
    try:
        decision = decide_files(args.baseline, args.candidate, spec)
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
    return "\n".join(lines)


def _fail(message: str) -> int:
    print(f"specdec gate: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT
