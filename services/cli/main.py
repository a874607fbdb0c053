"""The `specdec` command: a thin parser; each subcommand calls one use case (services/app) and renders it.

Every command imports only what it runs, so that `specdec --help` and the Redis
commands start at once: the handlers import their modules when called, and the
optional command modules register their parsers with argparse alone (a step's
scipy or matplotlib is loaded by its own command only).
tests/unit/cli/test_lazy_imports.py holds this; tests/perf/bench_cli.py times it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from contracts.inputs import STEP_INPUTS
from contracts.steps import STEPS
from services.runtime.errors import SpecdecError, invalid_input
from services.runtime.settings import RuntimeSettings

# Offline commands of the step services register themselves when built.
_OPTIONAL_COMMANDS = (
    "services.cli.commands.profile",
    "services.cli.commands.corpus",
    "services.cli.commands.gate",
    "services.cli.commands.report",
    "services.cli.commands.plan",
    "services.cli.commands.validate",
    "services.cli.commands.verbs",
    "services.cli.commands.mcp",
    "services.cli.commands.resume",
    "services.cli.commands.next",
    "services.cli.commands.cleanup",
)


def _connected(body: Callable[[Any, argparse.Namespace], Awaitable[int]]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        import asyncio

        from services.app.context import connect

        async def go() -> int:
            async with connect(RuntimeSettings()) as session:
                return await body(session, args)

        return asyncio.run(go())

    return run


async def _submit(session: Any, args: argparse.Namespace) -> int:
    from services.app.campaign.submit import submit

    run_id = await submit(session, Path(args.campaign), experiment_id=args.experiment_id)
    print(run_id)
    return 0


async def _approve(session: Any, args: argparse.Namespace) -> int:
    from services.app.runs.ops import approve

    result = await approve(session, args.run_id, acknowledged=args.i_understand_this_mutates_cluster)
    for plan in result.plans:
        print(f"approving {plan.schema_name}: {plan.uri} sha256={plan.sha256}")
    print(f"published run.approved {result.event_id} for {len(result.plan_sha256s)} plan(s)")
    return 0


async def _request(session: Any, args: argparse.Namespace) -> int:
    from services.app.runs.ops import request

    event_id = await request(session, args.step, args.run_id, inputs=args.input, reason=args.reason)
    print(f"published {args.step}.requested {event_id}")
    return 0


def render_status(result: Any) -> str:
    """A run's steps, one line each (RunStatus)."""
    lines = [f"run {result.run_id}: {result.events} events{' - HALTED' if result.halted else ''}"]
    for step in result.steps:
        lines.append(f"  {step.step:<9} {step.state:<18} {step.detail or ''}".rstrip())
    if getattr(result, "rounds", None) is not None:
        from services.app.runs.rounds_status import describe

        lines += describe(result.rounds)
    return "\n".join(lines)


async def _status(session: Any, args: argparse.Namespace) -> int:
    from services.app.runs.leftovers import describe, unowned
    from services.app.runs.ops import status

    result = await status(session, args.run_id)
    leftovers = await unowned(session, args.run_id)
    if args.json and leftovers:
        import orjson

        data = {**orjson.loads(result.model_dump_json()), "leftover_processes": [p.model_dump() for p in leftovers]}
        print(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
    elif args.json:
        print(result.model_dump_json(indent=2))
    else:
        print("\n".join([render_status(result), *describe(args.run_id, leftovers)]))
    return 1 if result.halted else 0


def watched_line(event: Any) -> str:
    return f"{event.stamp} {event.run_id} {event.schema_name:<22} {event.progress}"


async def _watch(session: Any, args: argparse.Namespace) -> int:
    from services.app.runs.ops import watch
    from services.cli.progress_view import progress_view

    # Progress (step.progress) as bars on a terminal, plain periodic lines elsewhere.
    view = progress_view(sys.stdout)
    try:
        await watch(session, args.run_id, on_event=lambda event: view.line(watched_line(event)),
                    on_progress=view.progress, from_start=args.from_start, timeout_s=args.timeout)
    finally:
        view.close()
    return 0


async def _dlq(session: Any, args: argparse.Namespace) -> int:
    from services.app.runs.ops import dlq_list, dlq_replay

    if args.dlq_command == "replay":
        stream = await dlq_replay(session, args.dead_letter_id)
        print(f"replayed {args.dead_letter_id} onto {stream}")
        return 0
    letters = await dlq_list(session)
    if args.json:
        import orjson

        print(orjson.dumps([letter.record for letter in letters], option=orjson.OPT_INDENT_2).decode())
        return 0
    if not letters:
        print("dead-letter stream is empty")
    for letter in letters:
        r = letter.record
        print(f"{r['dead_letter_id']}  {r['kind']:<9} {r['service']:<13} {r['stream']}  run={r.get('run_id') or '-'}"
              f"  deliveries={r['delivery_count']}{'  (replayed)' if letter.replayed else ''}\n    {r['reason']}")
    return 0


def _up(args: argparse.Namespace) -> int:
    from services.cli.up import up

    return up(args.services, sys.stdout)


def _contracts(args: argparse.Namespace) -> int:
    from services.cli.export import asyncapi_document, export

    if args.contracts_command == "export":
        for path in export(Path(args.directory)):
            print(path)
    else:
        sys.stdout.write(asyncapi_document())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specdec", description="Speculative-decoding campaigns for vLLM, with evidence."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("submit", help="validate a campaign, create its run and bundle, publish campaign.submitted")
    p.add_argument("campaign", help="campaign YAML file (see infra/examples/campaign.yaml)")
    p.add_argument("--experiment-id", metavar="RUN_ID",
                   help="use this run ID (one you already use) instead of a generated one: 3-63 characters of a-z, 0-9 "
                   "and '-', alphanumeric at both ends, not in use (no bundle folder, no event)")
    p.set_defaults(func=_connected(_submit))

    p = sub.add_parser("approve", help="approve a run's pending plans (they change the cluster)")
    p.add_argument("run_id")
    p.add_argument("--i-understand-this-mutates-cluster", action="store_true", help="typed acknowledgement; required")
    p.set_defaults(func=_connected(_approve))

    p = sub.add_parser("request", help="publish <step>.requested: start a pipeline at any step")
    p.add_argument("step", choices=STEPS)
    p.add_argument("run_id")
    names = "; ".join(f"{step}: {', '.join(known)}" for step, known in STEP_INPUTS.items() if known)
    p.add_argument("--input", action="append", default=[], metavar="NAME=bundle://RUN/PATH",
                   help=f"replace a named input; the names each step reads ({names}); any other is refused")
    p.add_argument("--reason", help="why, recorded in the event")
    p.set_defaults(func=_connected(_request))

    p = sub.add_parser("watch", help="follow events live, one line each, with each run's step progress, and long "
                       "steps' progress (bars on a terminal, periodic lines elsewhere)")
    p.add_argument("run_id", nargs="?")
    p.add_argument("--from-start", action="store_true", help="replay each stream from its first entry")
    p.add_argument("--timeout", type=float, help="stop after this many seconds")
    p.set_defaults(func=_connected(_watch), reads_only=True)

    p = sub.add_parser("status", help="each step's state for a run (exit 1 when the run halted)")
    p.add_argument("run_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_connected(_status), reads_only=True)

    p = sub.add_parser("dlq", help="the dead-letter stream")
    dlq = p.add_subparsers(dest="dlq_command", required=True)
    q = dlq.add_parser("list", help="list dead letters with their reasons")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=_connected(_dlq), reads_only=True)
    q = dlq.add_parser("replay", help="put a dead letter's original payload back on its stream (once)")
    q.add_argument("dead_letter_id")
    q.set_defaults(func=_connected(_dlq))

    p = sub.add_parser("up", help="run the registered services as local processes until Ctrl-C")
    p.add_argument("services", nargs="*", help="services to run (default: all built)")
    p.set_defaults(func=_up)

    p = sub.add_parser("contracts", help="event and campaign schemas")
    c = p.add_subparsers(dest="contracts_command", required=True)
    q = c.add_parser("export", help="write the JSON Schema of every event and of the campaign file")
    q.add_argument("directory")
    q.set_defaults(func=_contracts)
    q = c.add_parser("asyncapi", help="print the AsyncAPI document of the topology")
    q.set_defaults(func=_contracts)

    for module_name in _OPTIONAL_COMMANDS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        module.register(sub)
    return parser


# redis-py loads the OpenTelemetry metrics SDK whenever it is installed (vLLM installs it), for
# metrics specdec never turns on: ~0.1 s of a reading command's 0.5 s. redis-py imports it
# optionally (an ImportError leaves its metrics off), so such a command, which exits when done
# and imports nothing else that needs the SDK, marks it absent before redis is imported.
# Only in a process that has not loaded redis yet: one that has (a test run, a host calling
# main() in-process) gains nothing, and may import the SDK later for its own use.
_METRICS_SDK = "opentelemetry.sdk.metrics"


def _without_metrics_sdk() -> None:
    if "redis" not in sys.modules and _METRICS_SDK not in sys.modules:
        sys.modules[_METRICS_SDK] = None  # type: ignore[assignment]  # import raises ImportError


def main(argv: list[str] | None = None) -> int:
    from services.runtime.environment import startup_problem

    # First: an unknown or bad SPECDEC_* variable fails every command, --help included.
    problem = startup_problem()
    if problem is not None:
        print(f"specdec: {problem}", file=sys.stderr)
        return 2
    try:
        settings = RuntimeSettings()
    except ValidationError as exc:  # a SPECDEC_* value the settings refuse: one line, not a traceback
        print(f"specdec: {invalid_input(exc)}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    # After parsing: --help and a usage error log nothing, so they skip structlog's import; so do
    # the commands that only read the streams (reads_only), which never log through it.
    from services.runtime.health import logs

    if getattr(args, "reads_only", False):
        _without_metrics_sdk()
        logs.configure_stdlib(settings.log_level)
    else:
        logs.configure("cli", settings.log_level)
    try:
        return int(args.func(args))
    except SpecdecError as exc:
        print(f"specdec: {exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        print(f"specdec: {invalid_input(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
