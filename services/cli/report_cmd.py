"""`specdec report` and `specdec publish`: the publisher's logic, offline (no Redis).

Both read the run's bundle under SPECDEC_BUNDLE_ROOT (default ./bundles).

- `specdec report RUN_ID` renders the report into the bundle's report/
  (write-once; the same evidence gives the same bytes) and prints the paths;
  `--out DIR` writes a copy to DIR instead and leaves the bundle untouched.
- `specdec publish RUN_ID` is a dry run: it prints what would be sent where and
  writes nothing. `--i-understand-this-publishes-externally` makes it live (the
  campaign's own acknowledgement is for the automated service path, not for a
  person at a terminal); `--dry-run` keeps it a dry run even with the flag.
  `--target` replaces the campaign's publish.target.

Exit status 0 on success (a dry run included); 2 with the reason on stderr
otherwise (no rendered report, a target that refused the report, ...).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import datetime, timezone
from pathlib import Path

from contracts import layout
from contracts.campaign import Campaign
from services.publisher.pipeline import render_copy, render_run
from services.publisher.publish import Publication, mode, parse_target, publish_run
from services.runtime.bundle import ArtifactMissing, BundleStore
from services.runtime.settings import RuntimeSettings


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
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
        description="Send the rendered report to the campaign's publish target (file://DIR or http(s)://URL). "
        "A dry run (the default) prints what would be sent where and sends nothing.",
    )
    p.add_argument("run_id")
    p.add_argument(
        "--dry-run", action="store_true", help="only show what would be sent (the default without the acknowledgement)"
    )
    p.add_argument("--target", metavar="URL", help="file://DIR or http(s)://URL instead of the campaign's publish.target")
    p.add_argument(
        "--i-understand-this-publishes-externally", action="store_true",
        help="typed acknowledgement: send the report for real",
    )
    p.set_defaults(func=run_publish)


def _bundle() -> BundleStore:
    return BundleStore(RuntimeSettings().bundle_root)


def run_report(args: argparse.Namespace) -> int:
    bundle = _bundle()
    if args.out is not None:
        report, summary, paths = render_copy(bundle, args.run_id, args.out)
    else:
        outcome = render_run(bundle, args.run_id)
        report, summary = outcome.report, outcome.summary
        paths = [bundle.resolve(ref.uri) for ref in outcome.refs]
    for path in paths:
        print(path)
    state = f"DRAFT ({len(summary.draft_reasons)} reason(s))" if summary.draft else "final"
    print(f"report of {args.run_id}: {state}; {len(report.plots)} plot(s); next lever: {summary.levers[0]}", file=sys.stderr)
    for reason in summary.draft_reasons:
        print(f"  DRAFT: {reason}", file=sys.stderr)
    return 0


def run_publish(args: argparse.Namespace) -> int:
    bundle = _bundle()
    target = args.target
    if target is None:
        try:
            target = Campaign.model_validate(bundle.read_json(args.run_id, layout.CAMPAIGN)).publish.target
        except ArtifactMissing:
            print(f"specdec publish: run {args.run_id} has no {layout.CAMPAIGN}: give --target", file=sys.stderr)
            return 2
    parse_target(target)  # a bad target fails before anything else
    acknowledged_by = "cli" if args.i_understand_this_publishes_externally else None
    dry_run, _ = mode(acknowledged_by, force_dry_run=args.dry_run)
    key = "cli-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    publication = asyncio.run(publish_run(
        bundle, args.run_id, target=target, key=key, acknowledged_by=acknowledged_by,
        force_dry_run=args.dry_run, record=not dry_run,
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
