"""The review point of a publish: an external target (`s3://`, `https://`, `http://`) gets only what a dry run showed.

Every dry run to an external target records `publish/dry-run/<digest>.json`; a live publish needs that
record for the same manifest and destination and the acknowledgement on the same call, and a DRAFT an
explicit override. The service goes live from its own dry run only under the campaign's pre-approval
policy, never for a DRAFT (docs/lake.md, "The review point")."""

from __future__ import annotations

import hashlib
from typing import Final, Literal

from pydantic import Field

from contracts import layout
from contracts.envelope import RunId, Sha256, Strict
from services.publisher.errors import PublishRefused
from services.publisher.publish.outbox import DraftOverride, Outbox, SentFile

DRY_RUN_VERSION: Final = 1
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
    manifest_sha256: Sha256 = Field(
        description="sha256 of the manifest.json it would send; a live publish must match it."
    )
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
        raise PublishRefused(
            f"live publish of {run_id} to {destination} refused, nothing was sent: " + "; ".join(problems))
    why = f"live: {ACK_FIELD} given by the {acknowledged_by}, after the dry run recorded in {reviewed}"
    return True, why + (f"; DRAFT published on override: {override.reason}" if override is not None else "")
