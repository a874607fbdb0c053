"""`specdec gate`: the gate's decision from trial result files, offline (same logic as the gate service).

Exit status 0 on any decision (promote, reject, inconclusive); 2 when the input
cannot be read or the gate spec is invalid.
"""

from __future__ import annotations

import argparse
import glob
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contracts.decision import Decision
    from contracts.trials import Trial
    from services.gate import decide, load_trials

EXIT_BAD_INPUT = 2

# The gate's entry points, bound here on first use: services.gate loads
# scipy.stats and numpy (~1 s), which building the `specdec` parser (every
# command) must not wait for. Module attributes all the same, so that
# `gate_cmd.decide` names the gate's function (and a test can replace it).
_GATE_NAMES = ("decide", "load_trials")


def _bind_gate() -> None:
    import services.gate

    for name in _GATE_NAMES:
        if name not in globals():  # a replaced one is kept
            globals()[name] = getattr(services.gate, name)


def __getattr__(name: str) -> Any:
    if name in _GATE_NAMES:
        _bind_gate()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    from pydantic import ValidationError

    from contracts.campaign import GateSpec
    from services.gate import GateError, GateInputError

    _bind_gate()
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
        baseline_paths = [p for pattern in args.baseline for p in _expand(pattern)]
        candidate_specs = [(*_split_name(text), text) for text in args.candidate]
        candidate_paths = {text: _expand(pattern) for _, pattern, text in candidate_specs}
        shared = set(baseline_paths) & {p for paths in candidate_paths.values() for p in paths}
        if shared:
            raise GateInputError(f"file(s) match both the baseline and a candidate: {sorted(map(str, shared))}")
        trials = load_trials([*baseline_paths, *(p for paths in candidate_paths.values() for p in paths)])
        baseline, rest = trials[: len(baseline_paths)], trials[len(baseline_paths) :]
        candidates: dict[str, list[Trial]] = {}
        for index, (name, _, text) in enumerate(candidate_specs):
            group, rest = rest[: len(candidate_paths[text])], rest[len(candidate_paths[text]) :]
            for key, group_trials in _name_groups(name, group, index).items():
                if key in candidates:
                    raise GateInputError(f"candidate {key!r} is given twice: name each --candidate NAME=GLOB")
                candidates[key] = group_trials
        decision = decide(baseline, candidates, spec)
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


def _expand(pattern: str) -> list[Path]:
    from services.gate import GateInputError

    matches = sorted(glob.glob(pattern, recursive=True))
    if not matches:
        raise GateInputError(f"no file matches {pattern!r}")
    return [Path(m) for m in matches]


def _split_name(text: str) -> tuple[str | None, str]:
    from contracts.envelope import KEY_RE

    name, sep, pattern = text.partition("=")
    if sep and KEY_RE.match(name):
        return name, pattern
    return None, text


def _name_groups(name: str | None, trials: list[Trial], index: int) -> dict[str, list[Trial]]:
    if name is not None:
        return {name: trials}
    if all(t.cell_id for t in trials):
        groups: dict[str, list[Trial]] = {}
        for t in trials:
            groups.setdefault(t.cell_id, []).append(t)  # type: ignore[arg-type]
        return groups
    return {"candidate" if index == 0 else f"candidate-{index + 1}": trials}


def _fail(message: str) -> int:
    print(f"specdec gate: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT
