"""The campaign workflow's tools by its own names and call shape: `args`, parsed as the CLI verb parses it.

One argparse parser per verb, shared by the CLI verb and the MCP tool. A parse never prints and never
exits (`--help` and usage errors come back as data), and an acknowledgement-looking token inside
`args` is refused: acknowledgements are typed fields (docs/mcp.md#the-workflow-document-call-by-call).
"""

from __future__ import annotations

import argparse
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from pydantic import Field

from contracts import layout
from contracts.argv import ArgvError, check_token
from contracts.envelope import Strict
from services.app.campaign.roots import FileRoots
from services.runtime.errors import ConfigurationError

EVIDENCE_INIT = "evidence_init"
CAMPAIGN_INIT = "perf_tune_report_campaign_init"
CAMPAIGN_RUN = "perf_tune_report_campaign_run"
PUBLISH = "perf_tune_report_publish_to_lake"
VERBS = (EVIDENCE_INIT, CAMPAIGN_INIT, CAMPAIGN_RUN, PUBLISH)
# The CLI's name of each verb (`specdec <name> ARGS`).
CLI_NAMES = {EVIDENCE_INIT: "evidence-init", CAMPAIGN_INIT: "campaign-init", CAMPAIGN_RUN: "campaign-run",
             PUBLISH: "publish-to-lake"}


class ArgsRefused(ConfigurationError):
    """`args` that the verb's parser refuses, or that carry an acknowledgement; the message says which."""


class _Stop(Exception):
    """argparse wanted to exit: after --help (status 0) or on a usage error (its message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """A parser that never writes to stdout or exits: an MCP server's stdout is its protocol."""

    def __init__(self, **kwargs: Any) -> None:  # by keyword only, as argparse's subparsers build one
        super().__init__(exit_on_error=False, **kwargs)
        self.printed = io.StringIO()

    def _print_message(self, message: str, file: Any = None) -> None:
        if message:
            self.printed.write(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise _Stop(status, message or "")

    def error(self, message: str) -> NoReturn:
        raise _Stop(2, f"{self.prog}: {message}")


def parser(verb: str, *, add_help: bool = True) -> argparse.ArgumentParser:
    """The verb's arguments; the CLI builds its subcommand on it (`parents=`), the MCP tool parses `args` with it."""
    p = _Parser(prog=verb, add_help=add_help, description=_DESCRIPTIONS[verb])
    if verb == EVIDENCE_INIT:
        p.add_argument("--family", required=True, help="model family label (the campaign's family); a generated run ID "
                       "starts with it")
        p.add_argument("--intent", help="what this campaign is for, in words: stored in the bundle (intent.json) and "
                       "shown in the report")
        p.add_argument("--run-id", help="a run ID the caller already uses (3-63 of a-z, 0-9, '-'); generated if absent")
    elif verb == CAMPAIGN_INIT:
        p.add_argument("--config", required=True, help="the campaign file: the canonical matrix YAML, or specdec's own")
        p.add_argument("--experiment-id", required=True, help="the run evidence_init created (or a new run ID)")
        p.add_argument("--family", required=True, help="the campaign's family; a campaign of another is refused")
        p.add_argument("--evidence-bundle", help="the run's bundle folder: <bundle root>/<experiment-id>")
    elif verb == CAMPAIGN_RUN:
        p.add_argument("--config", required=True, help="the campaign file the run holds (refused when it is another)")
        p.add_argument("--campaign", required=True, help="the run: its bundle folder or its run ID")
        p.add_argument("--dry-run", action="store_true", help="publish the campaign so the plans are produced, and "
                       "return them with their sha256; nothing executes (the default without the acknowledgement)")
    elif verb == PUBLISH:
        p.add_argument("--campaign", required=True, help="the run: its bundle folder or its run ID")
        p.add_argument("--target", help="file://DIR, s3://BUCKET/PREFIX or https://URL instead of the campaign's "
                       "publish.target")
        p.add_argument("--dry-run", action="store_true", help="only show what would be sent (the default without the "
                       "acknowledgement)")
        p.add_argument("--publish-draft", metavar="REASON", help="publish a DRAFT report to an external target anyway, "
                       "recording REASON (the same reason must be given to the dry run)")
    return p


_DESCRIPTIONS = {
    EVIDENCE_INIT: "Create one identity: a run, its ID (also the experiment ID, campaign ID, scheduler label and join "
                   "key) and its empty evidence bundle. Publishes nothing.",
    CAMPAIGN_INIT: "Validate the campaign (every problem at once) and store it, the operator's commands and source "
                   "revisions in the run's bundle before anything runs. Publishes nothing.",
    CAMPAIGN_RUN: "Dry run (default): publish the stored campaign so the steps that change nothing run and every plan "
                  "is produced; return the plans with their sha256. Live (the typed acknowledgement): approve exactly "
                  "the plans this run's preceding dry run returned.",
    PUBLISH: "Publish the run's rendered report: a dry run (default) shows what would be sent where; live needs the "
             "typed acknowledgement i_understand_this_publishes_externally.",
}


@dataclass(frozen=True)
class ArgsParsed:
    """`args` as the verb's parser read them, or the help it printed (`namespace` None then)."""

    namespace: argparse.Namespace | None
    help: str | None


def parse(verb: str, args: Sequence[str]) -> ArgsParsed:
    """`args` for `verb`: ArgsRefused names an acknowledgement token or what the parser refused."""
    for token in args:
        try:
            check_token(str(token).replace("{", "{{").replace("}", "}}"))
        except ArgvError as exc:
            raise ArgsRefused(f"{verb}: {exc}; give the typed field instead (nothing was done)") from None
    p = parser(verb)
    try:
        namespace = p.parse_args(list(args))
    except _Stop as stop:
        if stop.status == 0:
            return ArgsParsed(namespace=None,
                              help=p.printed.getvalue())  # type: ignore[attr-defined]  # parser() makes a _Parser
        raise ArgsRefused(f"{stop} (see {verb} with args [\"--help\"]); nothing was done") from None
    except argparse.ArgumentError as exc:
        raise ArgsRefused(f"{verb}: {exc} (see {verb} with args [\"--help\"]); nothing was done") from None
    return ArgsParsed(namespace=namespace, help=None)


class VerbResult(Strict):
    """What a workflow verb did, for an agent: the run, its bundle, what happened and what to call next."""

    verb: str = Field(description="The workflow tool called.")
    run_id: str | None = Field(description="The run; None for --help.")
    bundle: str | None = Field(description="The run's evidence bundle folder; None for --help.")
    happened: str = Field(description="What the call did, in words.")
    next_step: str = Field(description="The workflow's next step, as the workflow document names it.")
    dry_run: bool | None = Field(default=None, description="campaign_run and publish: True when nothing executed.")
    plans: list[dict[str, Any]] = Field(default_factory=list, description="campaign_run: every plan of the run so "
                                        "far (step, sha256, uri, approved, the plan document).")
    approved_sha256s: list[str] = Field(default_factory=list, description="campaign_run live: the plans approved.")
    publication: dict[str, Any] | None = Field(default=None, description="publish: the publication record (files, "
                                               "hashes, destination).")
    help: str | None = Field(default=None, description="The verb's --help text, when asked for.")


def resolve_run(campaign: str, bundle_root: Path) -> str:
    """`--campaign`: a run ID, or a bundle folder under the bundle root (its name is the run ID)."""
    given = Path(campaign)
    if given.is_absolute() or "/" in campaign or given.exists():
        root, path = bundle_root.absolute().resolve(), given.absolute().resolve()
        if path.parent != root:
            raise ArgsRefused(f"--campaign {campaign}: not a run's bundle folder under the bundle root {root} "
                              "(SPECDEC_BUNDLE_ROOT): give the run ID or <bundle root>/<run ID>")
        return path.name
    return campaign


def same_config(bundle_root: Path, run_id: str, config: Path, roots: FileRoots | None = None) -> None:
    """`--config` must be the campaign file the run holds (its bytes, as stored at campaign_init); with `roots`,
    read only under them."""
    stored = bundle_root / run_id / layout.CAMPAIGN_YAML
    source = roots.confine(config, "the campaign file") if roots is not None else config
    try:
        given = source.read_bytes()
    except OSError as exc:
        raise ArgsRefused(f"--config {config}: cannot read it ({exc.strerror})") from None
    if not stored.is_file():
        raise ArgsRefused(f"run {run_id} holds no campaign: call {CAMPAIGN_INIT} with --config {config} first")
    if stored.read_bytes() != given:
        raise ArgsRefused(f"--config {config} is not the campaign run {run_id} holds ({stored}): a run is one "
                          "campaign; give its file, or start a new run with evidence_init")
