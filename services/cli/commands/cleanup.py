"""`specdec cleanup RUN_ID`: end the processes still labelled with a run that no live service holds.

A dry run by default: it lists the run's labelled processes on this machine (of
this deployment, or of none) and ends nothing. With the typed acknowledgement
(`--i-understand-this-kills-processes`) it ends their process groups, SIGTERM,
then SIGKILL after a grace period, selected by the run's label only
(services/app/runs/leftovers.py). It refuses, ending nothing, while a live
service holds the run. Exit status 0; 2 with the reason on stderr.
"""

from __future__ import annotations

import argparse

ACK = "--i-understand-this-kills-processes"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "cleanup",
        help="end the processes still labelled with a run no live service holds (dry run unless acknowledged)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    p.add_argument("run_id")
    p.add_argument(ACK, action="store_true", help="typed acknowledgement: end the processes for real")
    p.add_argument("--json", action="store_true", help="print what was found and ended as JSON")
    p.set_defaults(func=run_cleanup)


def render(result: object) -> str:
    from services.app.runs.leftovers import Cleanup

    assert isinstance(result, Cleanup)
    if not result.processes:
        return f"no process on this machine is labelled experiment={result.run_id}"
    lines = [f"  pid {p.pid} (group {p.pgid}, service {p.service})" for p in result.processes]
    if result.dry_run:
        head = f"dry run: {len(result.processes)} process(es) labelled experiment={result.run_id}, no live service:"
        tail = f"nothing was ended; run `specdec cleanup {result.run_id} {ACK}` to end them"
    else:
        head = f"ended {len(result.ended_groups)} process group(s) labelled experiment={result.run_id}:"
        tail = ""
    return "\n".join([head, *lines, *([tail] if tail else [])])


def run_cleanup(args: argparse.Namespace) -> int:
    import asyncio

    from services.app.context import connect
    from services.app.runs.leftovers import cleanup
    from services.runtime.settings import RuntimeSettings

    async def go() -> int:
        async with connect(RuntimeSettings()) as session:
            result = await cleanup(session, args.run_id, acknowledged=getattr(args, ACK.lstrip("-").replace("-", "_")))
        print(result.model_dump_json(indent=2) if args.json else render(result))
        return 0

    return asyncio.run(go())
