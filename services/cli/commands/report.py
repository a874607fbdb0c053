"""`specdec report` and `specdec publish`: the use cases of services/app/runs/report.py, offline (no Redis).

`report` renders into the run's bundle (write-once) or a copy elsewhere; `publish` is a dry run unless
the person at the terminal types the acknowledgement, and a live external publish needs a dry run of
the same report and target first (docs/publisher.md#commands, docs/lake.md). Exit 0 on success, a dry
run included; 2 with the reason on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.publisher.publish.publish import Publication
    from services.runtime.bundle.bundle import BundleStore


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        help="render a run's report (Markdown + self-contained HTML) from its bundle",
        description="Aggregate the campaign from the run's bundle and render report/report.md and "
        "report/report.html (plots embedded) into it; print the paths.",
    )
    p.add_argument("run_id")
    p.add_argument("--out", type=Path, metavar="DIR", help="write a copy to DIR instead of the bundle")
    p.set_defaults(func=run_report)

    p = subparsers.add_parser(
        "publish",
        help="publish a run's rendered report (dry run unless acknowledged)",
        description="Send the rendered report to the campaign's publish target (file://DIR, s3://BUCKET/PREFIX or "
        "http(s)://URL). A dry run (the default) prints what would be sent where and sends nothing; a live publish to "
        "an external target (s3://, http(s)://) needs a dry run of the same report first (docs/lake.md).",
    )
    p.add_argument("run_id")
    p.add_argument(
        "--dry-run", action="store_true", help="only show what would be sent (the default without the acknowledgement)"
    )
    p.add_argument("--target", metavar="URL",
                   help="file://DIR, s3://BUCKET/PREFIX or http(s)://URL instead of the campaign's publish.target "
                   "(http(s):// only where the settings allow: SPECDEC_PUBLISH_ALLOWED_TARGETS, docs/lake.md)")
    p.add_argument("--publish-draft", metavar="REASON",
                   help="publish a DRAFT report to an external target anyway, recording REASON; the same reason must "
                   "be given to the dry run")
    p.add_argument(
        "--i-understand-this-publishes-externally", action="store_true",
        help="typed acknowledgement: send the report for real",
    )
    p.set_defaults(func=run_publish)


def _bundle() -> BundleStore:
    from services.runtime.bundle.bundle import BundleStore
    from services.runtime.settings import RuntimeSettings

    return BundleStore(RuntimeSettings().bundle_root)


def run_report(args: argparse.Namespace) -> int:
    # Imported here: the publisher loads matplotlib and scipy (~0.7 s), which building the
    # `specdec` parser (every command) must not wait for.
    from services.app.runs import report

    bundle = _bundle()
    if args.out is not None:
        rendered, summary, paths = report.render_elsewhere(bundle, args.run_id, args.out)
    else:
        outcome = report.render(bundle, args.run_id)
        rendered, summary = outcome.report, outcome.summary
        paths = [bundle.resolve(ref.uri) for ref in outcome.refs]
    for path in paths:
        print(path)
    state = f"DRAFT ({len(summary.draft_reasons)} reason(s))" if summary.draft else "final"
    print(f"report of {args.run_id}: {state}; {len(rendered.plots)} plot(s); next lever: {summary.levers[0]}",
          file=sys.stderr)
    for reason in summary.draft_reasons:
        print(f"  DRAFT: {reason}", file=sys.stderr)
    return 0


def run_publish(args: argparse.Namespace) -> int:
    import asyncio

    from services.app.runs import report
    from services.publisher.publish.outbox import DraftOverride
    from services.runtime.settings import RuntimeSettings

    override = DraftOverride(reason=args.publish_draft) if args.publish_draft else None
    publication = asyncio.run(report.publish(
        _bundle(), RuntimeSettings(), args.run_id, target=args.target,
        acknowledged_by="cli" if args.i_understand_this_publishes_externally else None,
        draft_override=override, dry_run=args.dry_run,
    ))
    print(render(publication))
    return 0


def render(publication: Publication) -> str:
    """What was (or would be) sent where, for a terminal."""
    total = sum(f.ref.size_bytes for f in publication.files)
    head = "DRY RUN: would send" if publication.dry_run else "sent"
    lines = [
        f"{head} {len(publication.files)} file(s), {total} bytes{' (a DRAFT report)' if publication.draft else ''} "
        f"to {publication.destination}",
        f"  {publication.mode_reason}",
        *(f"  {f.ref.sha256}  {f.ref.size_bytes:>9}  {f.name}" for f in publication.files),
    ]
    if publication.response is not None:
        lines.append(f"  response recorded: {publication.response.uri}")
    lines += [f"  wrote {path}" for path in publication.written]
    return "\n".join(lines)
