"""The workflow's verbs on the command line: `specdec evidence-init`, `campaign-init`, `campaign-run`,
`publish-to-lake`, each with the arguments the MCP tool of the same verb takes in `args`.

Each subcommand is built on the verb's own parser (services/app/workflow/verbs.py `parser`), so
a command line and an agent's `args` are read alike; the CLI adds the typed
acknowledgement as a flag of its own (the MCP tool takes it as a typed field, never in
`args`). Each prints the verb's result as JSON: the run, the bundle, what happened and
the next step in the workflow's words.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

from services.app.workflow import verbs

if TYPE_CHECKING:
    from services.app.results import RunCreated
    from services.app.workflow.verbs import VerbResult

ACK_FLAGS = {verbs.CAMPAIGN_RUN: ("--i-understand-this-mutates-cluster",
                                  "typed acknowledgement: approve the plans this run's preceding dry run returned"),
             verbs.PUBLISH: ("--i-understand-this-publishes-externally",
                             "typed acknowledgement: send the report for real")}


def register(subparsers: argparse._SubParsersAction) -> None:
    for verb in verbs.VERBS:
        own = verbs.parser(verb, add_help=False)
        p = subparsers.add_parser(verbs.CLI_NAMES[verb], parents=[own], help=f"the workflow's {verb}",
                                  description=own.description)
        if verb in ACK_FLAGS:
            flag, text = ACK_FLAGS[verb]
            p.add_argument(flag, action="store_true", dest="acknowledged", help=text)
        p.set_defaults(func=run, verb=verb)


def run(args: argparse.Namespace) -> int:
    from services.app.context import connect
    from services.app.workflow import verb_calls
    from services.runtime.settings import RuntimeSettings

    async def go() -> str:
        async with connect(RuntimeSettings()) as session:
            acknowledged = bool(getattr(args, "acknowledged", False))
            result: RunCreated | VerbResult
            if args.verb == verbs.EVIDENCE_INIT:
                result = await verb_calls.evidence_init(session, args)
            elif args.verb == verbs.CAMPAIGN_INIT:
                result = await verb_calls.campaign_init(session, args)
            elif args.verb == verbs.CAMPAIGN_RUN:
                result = await verb_calls.campaign_run(session, args, acknowledged=acknowledged)
            else:
                result = await verb_calls.publish(session, args, acknowledged=acknowledged)
            return result.model_dump_json(indent=2)

    sys.stdout.write(asyncio.run(go()) + "\n")
    return 0
