"""`specdec resume RUN_ID`: the use case of services/app/runs/resume.py.

Derives the run's next step from its bundle and journal and publishes that step's trigger again
(same event ID), or `<step>.requested` when the bundle does not hold it. Idempotent: a second
resume publishes the same event. Exit status 0 (also when there was nothing to resume); 2 with
the reason on stderr for a run nobody knows.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "resume",
        help="publish the trigger of a run's next step again, from its bundle (idempotent)",
        description="Derive the run's next step (the first neither done nor skipped) from its bundle and journal "
        "and publish that step's trigger again, with its event ID, or <step>.requested when the bundle does not "
        "hold it. Use it on a stalled run (`specdec status` names it) whose trigger Redis lost.",
    )
    p.add_argument("run_id")
    p.add_argument("--json", action="store_true", help="print what was done as JSON")
    p.set_defaults(func=run_resume)


def render(result: Any) -> str:
    """One line: the run and what was published (or why nothing was)."""
    return f"{result.run_id}: {result.detail}"


def run_resume(args: argparse.Namespace) -> int:
    import asyncio

    from services.app.context import connect
    from services.app.runs.resume import resume
    from services.runtime.settings import RuntimeSettings

    async def go() -> int:
        async with connect(RuntimeSettings()) as session:
            result = await resume(session, args.run_id)
        print(result.model_dump_json(indent=2) if args.json else render(result))
        return 0

    return asyncio.run(go())
