"""The review point of a publish: an external target gets only what a dry run showed.

`file://` targets stay on this machine and are not external; `s3://`,
`https://` and `http://` targets are. For an external target:

1. **A dry run records what it would send.** Every dry run to an external
   target writes `publish/dry-run/<digest>.json` (`DryRunRecord`: the
   destination, the manifest's sha256, the DRAFT flag and override, every file
   with its bundle ref and hash). The digest is that of the destination and the
   manifest hash, and the record holds no time, so the same dry run again is
   the same artifact (write-once, nothing new).
2. **A live publish needs that record and the acknowledgement on the same call.**
   The acknowledgement (`i_understand_this_publishes_externally`) must be given
   on the live call itself (`specdec publish --i-understand-this-publishes-externally`,
   the MCP tool's argument); the record of a dry run of the *same manifest
   hash* to the *same destination* must exist, or the call is refused
   (`PublishRefused`) and nothing is sent. A changed report, evidence, override
   or destination is a different manifest or digest: it needs its own dry run.
3. **A DRAFT goes out only on an explicit override** (`DraftOverride`, a
   reason in words). The override is part of the manifest, so the dry run
   shows it and the live publish must repeat it; the lake receives it in
   manifest.json and the bundle keeps it in the records. An override on a
   final report is refused: there is nothing to override.

The service path (app.py) reacts to `report.rendered` / `publish.requested`
and always makes the dry run and records it first. It goes live from that
dry run only under the campaign's pre-approval policy (docs/design.md#the-review-point, the review
point): `review.pre_approve` lists `publish` (with the acknowledgement, which
the contract requires beside it; acknowledged by "policy") and the report is
final. The campaign's acknowledgement alone (acknowledged by "campaign") sends
nothing live to an external target: nobody reviewed that dry run, so it stays
one, and the acknowledgement stands in contracts/inert.py's conditional table
there; a person (or the MCP tool) publishes the reviewed dry run with the
acknowledgement on that call. A campaign carries no override, so the service
never sends a DRAFT out: it stays a dry run (never an error), and a person
publishes it with the override if they mean to.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import Field

from contracts import layout
from contracts.envelope import RunId, Sha256, Strict
from services.publisher.errors import PublishRefused
from services.publisher.publish.outbox import DraftOverride, Outbox, SentFile

DRY_RUN_VERSION = 1
DRY_RUN_DIR = f"{layout.PUBLISH_DIR}/dry-run"
ACK_FIELD = "i_understand_this_publishes_externally"
# Who gave the acknowledgement: the campaign alone (the service: live to a folder only), the campaign's policy
# (the service, review.pre_approve lists publish), a person at `specdec publish`, or the MCP tool.
Acknowledger = Literal["campaign", "policy", "cli", "mcp"]
# The service's acknowledgers: both make and record the dry run before anything could go out.
SERVICE_ACKNOWLEDGERS = ("campaign", "policy")
PUBLISH_HOW = "`specdec publish RUN_ID --i-understand-this-publishes-externally`, or the MCP tool publish_to_lake"
OVERRIDE_HOW = "`specdec publish --publish-draft REASON`, or the MCP tool's draft_override"


class DryRunRecord(Strict):
    """What a dry run to an external target would send: publish/dry-run/<digest>.json."""

    version: Literal[1] = Field(default=DRY_RUN_VERSION, description="Version of this record.")
    run_id: RunId = Field(description="The run.")
    destination: str = Field(description="Where it would go: s3://BUCKET/PREFIX/RUN_ID/ or the URL.")
    manifest_sha256: Sha256 = Field(description="sha256 of the manifest.json it would send; a live publish must match it.")
    manifest_size_bytes: int = Field(ge=0, description="Size of that manifest.json.")
    draft: bool = Field(description="True when the report is a DRAFT.")
    draft_override: DraftOverride | None = Field(description="The override it was made with; None without one.")
    files: list[SentFile] = Field(description="Every file it would send (report, then evidence), with its hash.")


def dry_run_path(destination: str, manifest_sha256: str) -> str:
    """The record of a dry run of this manifest to this destination."""
    digest = hashlib.sha256(f"{destination}\n{manifest_sha256}".encode()).hexdigest()[:32]
    return f"{DRY_RUN_DIR}/{digest}.json"


def dry_run_record(run_id: str, destination: str, box: Outbox) -> DryRunRecord:
    return DryRunRecord(
        run_id=run_id, destination=destination, manifest_sha256=box.manifest_sha256,
        manifest_size_bytes=len(box.manifest), draft=box.summary.draft, draft_override=box.draft_override,
        files=[*box.files, *box.evidence],
    )


def check_override(run_id: str, draft: bool, override: DraftOverride | None) -> None:
    """An override is for a DRAFT only: on a final report it would record a decision nobody needed."""
    if override is not None and not draft:
        raise PublishRefused(
            f"the report of {run_id} is final, not a DRAFT: drop the DRAFT override (its reason would be recorded "
            "against a report that needs none)"
        )


def dry_run_reason(base: str, draft: bool, override: DraftOverride | None, *, external: bool) -> str:
    """The dry run's reason, with what a live publish of it will need."""
    if not external:
        return base
    if draft and override is None:
        return (f"{base}; the report is a DRAFT: a live publish to this target needs an explicit override with its "
                f"reason ({OVERRIDE_HOW}), given to a dry run and then to the live publish")
    if override is not None:
        return f"{base}; DRAFT override recorded in the manifest: {override.reason}"
    return base


def live_external(
    run_id: str, destination: str, *, acknowledged_by: Acknowledger, draft: bool, override: DraftOverride | None,
    reviewed: str | None,
) -> tuple[bool, str]:
    """(live, why) for an acknowledged publish to an external target; `reviewed` is the bundle path of
    the matching dry run record, None when there is none.

    The service's acknowledgers answer a dry run, never an error: the campaign's acknowledgement alone
    sends nothing (nobody reviewed the dry run), its policy (`review.pre_approve` lists publish) sends a
    final report and never a DRAFT. A person's or the MCP tool's request that cannot go live is refused
    with every reason, since they asked for a live publish and must learn it did not happen."""
    if acknowledged_by in SERVICE_ACKNOWLEDGERS:
        if reviewed is None:  # the service writes the record just before; a missing one is a bug, not a policy
            raise PublishRefused(f"no dry run recorded for {destination}: the service records one before going live")
        if acknowledged_by == "campaign":
            return False, (
                f"dry run: the campaign's {ACK_FIELD} alone publishes nothing live to an external target (it is "
                f"recorded as inert); review the dry run ({reviewed}) and publish it with the acknowledgement on that "
                f"call ({PUBLISH_HOW}), or list publish in the campaign's review.pre_approve"
            )
        if draft:
            return False, (
                f"dry run: the report is a DRAFT, and the campaign's review.pre_approve never sends a DRAFT to an "
                f"external target; review the dry run ({reviewed}) and publish it with an explicit override "
                f"({OVERRIDE_HOW})"
            )
        return True, (f"live: review.pre_approve lists publish (with the campaign's {ACK_FIELD}), after the dry run "
                      f"recorded in {reviewed}")
    problems = []
    if reviewed is None:
        problems.append(
            f"no dry run of this exact report to {destination} is recorded: make the same publish without the "
            f"acknowledgement first (a dry run records what it would send under {DRY_RUN_DIR}/), check it, then repeat "
            "it with the acknowledgement (a changed report, override or target needs a dry run of its own)"
        )
    if draft and override is None:
        problems.append(
            f"the report is a DRAFT: it goes to an external target only with an explicit override and its reason "
            f"({OVERRIDE_HOW}), given to the dry run and to the live publish alike"
        )
    if problems:
        raise PublishRefused(f"live publish of {run_id} to {destination} refused, nothing was sent: " + "; ".join(problems))
    why = f"live: {ACK_FIELD} given by the {acknowledged_by}, after the dry run recorded in {reviewed}"
    return True, why + (f"; DRAFT published on override: {override.reason}" if override is not None else "")
