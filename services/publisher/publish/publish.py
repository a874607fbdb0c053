"""Publish a rendered report: to a folder (`file://`), an S3 bucket (`s3://`) or an HTTP(S) endpoint.

Safe by default: a dry run unless acknowledged, and to an external target a live publish also needs a
recorded dry run of the same manifest (publish_review.py). Entry points: `publish_report` for a person or a
tool (the CLI, the MCP tool), `publish_run` for the service, with the request's key; a redelivered request
finds its records and sends nothing again (docs/publisher.md#publishing, docs/lake.md)."""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

import httpx
from pydantic import Field

from contracts import layout
from contracts.envelope import ArtifactRef, RunId, Strict
from services.publisher.errors import PublishConflict, PublishFailed, PublishRefused, PublishTargetError
from services.publisher.publish import credentials
from services.publisher.publish.outbox import DraftOverride, Outbox, SentFile, outbox
from services.publisher.publish.publish_review import (
    ACK_FIELD,
    SERVICE_ACKNOWLEDGERS,
    Acknowledger,
    check_override,
    dry_run_path,
    dry_run_reason,
    dry_run_record,
    live_external,
)
from services.publisher.publish.s3 import S3Target, parse_s3, publish_objects
from services.publisher.publish.transport import HttpRecord, Part, RetryPolicy, Sleep, post_report
from services.runtime.bundle.bundle import ArtifactConflict, ArtifactMissing, BundleError, BundleStore, InvalidPath
from services.runtime.bundle.bundle_paths import validate_relpath
from services.runtime.settings import RuntimeSettings

__all__ = ["ACK_FIELD", "Acknowledger", "DraftOverride", "Publication", "SentFile", "mode", "parse_target",
           "publish_report", "publish_run"]

PUBLICATION_VERSION: Final = 1
# One frozen policy shared by every call that passes none (the default a signature would build once).
_DEFAULT_POLICY = RetryPolicy()


@dataclass(frozen=True)
class FileTarget:
    relpath: str | None  # inside the run's bundle
    directory: Path | None  # absolute folder; the run's files go under <directory>/<run_id>/


@dataclass(frozen=True)
class HttpTarget:
    url: str


Target = FileTarget | HttpTarget | S3Target


def parse_target(target: str) -> Target:
    if target.startswith("s3://"):
        return parse_s3(target)
    if target.startswith(("http://", "https://")):
        try:
            url = httpx.URL(target)
        except httpx.InvalidURL as exc:
            raise PublishTargetError(f"publish target {target!r} is not a valid URL: {exc}") from None
        if not url.host:
            raise PublishTargetError(f"publish target {target!r} names no host: give https://HOST/PATH")
        return HttpTarget(url=target)
    if target.startswith("file://"):
        rest = target[len("file://"):].rstrip("/")
        if rest.startswith("/"):
            return FileTarget(relpath=None, directory=Path(rest))
        try:
            return FileTarget(relpath=validate_relpath(rest), directory=None)
        except InvalidPath as exc:
            raise PublishTargetError(
                f"publish target {target!r}: a relative file:// folder lies inside the run's bundle and must be a "
                f"valid bundle path ({exc}); give file:///ABSOLUTE/DIR for a folder elsewhere"
            ) from None
    raise PublishTargetError(f"publish target {target!r} must start with file://, s3://, https:// or http://")


def is_external(parsed: Target) -> bool:
    """Whether the files leave this machine: everything but a folder."""
    return not isinstance(parsed, FileTarget)


class Publication(Strict):
    """What a publish did (or would do): publish/<key>/publication.json."""

    version: Literal[1] = Field(default=PUBLICATION_VERSION, description="Version of this record.")
    run_id: RunId = Field(description="The run.")
    key: str = Field(description="Idempotency key of this publish (the request's event ID, or cli-<time>).")
    target: str = Field(description="The target as given.")
    destination: str = Field(description="Where the files go: a folder path, s3://BUCKET/PREFIX/RUN_ID/ or the URL.")
    dry_run: bool = Field(description="True when nothing was sent.")
    mode_reason: str = Field(description="Why it was a dry run, or who acknowledged the live publish.")
    acknowledged_by: Acknowledger | None = Field(
        description="Source of the acknowledgement of a live publish; None without."
    )
    draft: bool = Field(description="True when the published report is a DRAFT.")
    files: list[SentFile] = Field(description="The report's files sent (or that would be), with their hashes.")
    written: list[str] = Field(description="file:// and s3:// targets: what was written (paths, bundle or s3:// URIs).")
    response: ArtifactRef | None = Field(description="HTTP targets: the recorded attempts (response.json).")
    evidence: list[SentFile] = Field(
        default=[], description="The evidence files sent (or that would be) under evidence/."
    )
    manifest_sha256: str | None = Field(
        default=None, description="sha256 of the manifest.json sent (or that would be)."
    )
    external: bool = Field(default=False, description="True for s3://, https:// and http:// targets.")
    dry_run_record: str | None = Field(
        default=None,
        description="External targets: the bundle path of the dry-run record this publish made or matched.",
    )
    draft_override: DraftOverride | None = Field(default=None, description="The DRAFT override given; None without.")


def mode(acknowledged_by: Acknowledger | None, *, force_dry_run: bool) -> tuple[bool, str]:
    """(dry_run, why) for a publish request, before the review point of an external target."""
    if force_dry_run:
        return True, "dry run requested"
    if acknowledged_by is None:
        return True, (f"dry run: a live publish needs {ACK_FIELD}: true (the campaign's acknowledgements, "
                      "specdec publish --i-understand-this-publishes-externally, or the MCP tool's argument)")
    return False, f"live: {ACK_FIELD} given by the {acknowledged_by}"


async def publish_report(
    bundle: BundleStore,
    run_id: str,
    target: str,
    *,
    acknowledged_by: Literal["cli", "mcp"] | None,
    draft_override: DraftOverride | None = None,
    settings: RuntimeSettings,
    dry_run: bool = False,
    policy: RetryPolicy = _DEFAULT_POLICY,
) -> Publication:
    """Publish the run's rendered report to `target` on a person's or a tool's request.

    `acknowledged_by` is who typed the acknowledgement on this call ("cli", "mcp"); None, or
    `dry_run`, makes it a dry run. A dry run records what it would send (the dry-run record of an
    external target) and nothing else; a live publish records publish/<cli|mcp>-<UTC time>/.
    Raises a PublishError (review refusals, credentials, conflicts, failures) or ReportInputError."""
    if acknowledged_by not in (None, "cli", "mcp"):
        # The campaign's acknowledgement and policy are the service's (publish_run): a call here types its own.
        raise PublishRefused(
            f"acknowledged_by={acknowledged_by!r}: a call acknowledges as 'cli' or 'mcp', or not at all")
    live = acknowledged_by is not None and not dry_run
    key = f"{acknowledged_by or 'dry'}-" + datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return await publish_run(bundle, run_id, target=target, key=key, acknowledged_by=acknowledged_by,
                             force_dry_run=dry_run, record=live, draft_override=draft_override, settings=settings,
                             policy=policy)


async def publish_run(
    bundle: BundleStore,
    run_id: str,
    *,
    target: str,
    key: str,
    acknowledged_by: Acknowledger | None,
    force_dry_run: bool = False,
    record: bool = True,
    draft_override: DraftOverride | None = None,
    settings: RuntimeSettings | None = None,
    policy: RetryPolicy = _DEFAULT_POLICY,
    sleep: Sleep = asyncio.sleep,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Publication:
    """Publish (or dry-run) the run's rendered report to `target`; see the module doc and publish_review.py."""
    parsed = parse_target(target)
    settings = settings if settings is not None else RuntimeSettings()
    token = credentials.token_source(settings)
    if isinstance(parsed, HttpTarget) and parsed.url.startswith("http://") and token is not None:
        raise PublishRefused(
            f"publish target {target} is plain http:// while a bearer token is configured ({token.describe()}): a "
            "token is never sent unencrypted; use https://, or unset the token setting for this endpoint"
        )
    if isinstance(parsed, HttpTarget):
        # Before the dry run too: a person reviews only what could be sent.
        credentials.check_destination(settings, parsed.url, _reviewed_target(bundle, run_id))
    record_path = layout.publication(key)
    if record:
        try:
            return Publication.model_validate(bundle.read_json(run_id, record_path))
        except ArtifactMissing:
            pass
    box = outbox(bundle, run_id, draft_override)
    draft = box.summary.draft
    check_override(run_id, draft, draft_override)
    external = is_external(parsed)
    destination = _destination(bundle, run_id, parsed)
    dry_run, why = mode(acknowledged_by, force_dry_run=force_dry_run)
    reviewed: str | None = None
    if external:
        path = dry_run_path(destination, box.manifest_sha256)
        if dry_run or acknowledged_by in SERVICE_ACKNOWLEDGERS:
            # The service always makes and records the dry run first: its policy goes live from it, and
            # without one it is what a person reviews before publishing it.
            bundle.write_json(run_id, path, dry_run_record(run_id, destination, box))
        reviewed = path if _recorded(bundle, run_id, path) else None
        if dry_run:
            why = dry_run_reason(why, draft, draft_override, external=True)
        else:
            live, why = live_external(
                run_id, destination, acknowledged_by=acknowledged_by,  # type: ignore[arg-type]  # live: mode() found one
                draft=draft, override=draft_override, reviewed=reviewed)
            dry_run = not live
    written: list[str] = []
    response: ArtifactRef | None = None
    if not dry_run:
        if isinstance(parsed, FileTarget):
            written = _write_files(bundle, run_id, parsed, box)
        elif isinstance(parsed, S3Target):
            metadata = {"specdec-run-id": run_id, "specdec-draft": "true" if draft else "false"}
            written = await asyncio.to_thread(publish_objects, parsed, run_id, box.objects(), metadata=metadata,
                                              attempts=policy.attempts, timeout_s=policy.timeout_s)
        else:
            response = await _send_http(bundle, run_id, parsed, box, key=key, settings=settings, policy=policy,
                                        sleep=sleep, transport=transport, record=record)
    publication = Publication(
        run_id=run_id, key=key, target=target, destination=destination, dry_run=dry_run, mode_reason=why,
        acknowledged_by=None if dry_run else acknowledged_by, draft=draft, files=box.files, written=written,
        response=response, evidence=box.evidence, manifest_sha256=box.manifest_sha256, external=external,
        dry_run_record=reviewed, draft_override=draft_override,
    )
    if record:
        bundle.write_json(run_id, record_path, publication)
    return publication


def _reviewed_target(bundle: BundleStore, run_id: str) -> str | None:
    """The campaign's publish.target as the run's bundle records it (campaign.json, hash-checked); None when
    there is none to read."""
    try:
        stored = bundle.read_json(run_id, layout.CAMPAIGN)
    except BundleError:
        return None
    publish = stored.get("publish") if isinstance(stored, dict) else None
    target = publish.get("target") if isinstance(publish, dict) else None
    return target if isinstance(target, str) else None


def _recorded(bundle: BundleStore, run_id: str, relpath: str) -> bool:
    try:
        bundle.ref(run_id, relpath)
    except ArtifactMissing:
        return False
    return True


def _destination(bundle: BundleStore, run_id: str, parsed: Target) -> str:
    if isinstance(parsed, HttpTarget):
        return parsed.url
    if isinstance(parsed, S3Target):
        return parsed.destination(run_id)
    if parsed.relpath is not None:
        return str(bundle.run_dir(run_id) / parsed.relpath)
    return str(parsed.directory / run_id)  # type: ignore[operator]  # parse_target: no relpath, so a directory


def _write_files(bundle: BundleStore, run_id: str, target: FileTarget, box: Outbox) -> list[str]:
    files = [(name, data) for name, data, _ in box.objects()]
    if target.relpath is not None:
        try:
            return [bundle.write_bytes(run_id, f"{target.relpath}/{name}", data).uri for name, data in files]
        except ArtifactConflict as exc:
            raise PublishConflict(f"{exc}; publish to another folder") from None
    folder = target.directory / run_id  # type: ignore[operator]  # parse_target: no relpath, so a directory
    return [str(_write_once(folder / name, data)) for name, data in files]


def _write_once(path: Path, data: bytes) -> Path:
    """Create `path` whole with `data`; the same bytes already there are fine, other bytes are refused."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # readable by whoever serves the folder, like the bundle's artifacts
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            if path.read_bytes() != data:
                raise PublishConflict(
                    f"{path} already exists with other bytes: published files are never overwritten; "
                    "publish to another folder or remove the old copy yourself"
                ) from None
    finally:
        os.unlink(tmp)
    return path


async def _send_http(
    bundle: BundleStore, run_id: str, target: HttpTarget, box: Outbox, *, key: str, settings: RuntimeSettings,
    policy: RetryPolicy, sleep: Sleep, transport: httpx.AsyncBaseTransport | None, record: bool,
) -> ArtifactRef | None:
    response_path = layout.publication_response(key)
    result = _previous_record(bundle, run_id, response_path) if record else None
    if result is None:
        # Read the token and the trust now, before the first byte goes out; neither is recorded.
        source = credentials.token_source(settings)
        result = await post_report(
            target.url,
            manifest=box.manifest,
            parts=[Part(f.name, box.data[f.name], f.content_type) for f in (*box.files, *box.evidence)],
            headers={"X-Specdec-Run-Id": run_id, "X-Specdec-Draft": "true" if box.summary.draft else "false"},
            idempotency_key=f"{run_id}-{key}",
            token=credentials.read_token(source) if source is not None else None,
            verify=credentials.tls_verify(settings),
            policy=policy,
            sleep=sleep,
            transport=transport,
        )
    ref = bundle.write_json(run_id, response_path, result) if record else None
    if result.outcome != "accepted":
        final = result.final
        got = f"HTTP {final.status}" if final.status is not None else final.error
        hint = (" (the endpoint refused the credentials: check the token SPECDEC_PUBLISH_TOKEN_ENV / _FILE names)"
                if final.status in (401, 403) else "")
        raise PublishFailed(
            f"{target.url} did not accept the report after {len(result.attempts)} attempt(s) ({result.outcome}, last: "
            f"{got}){hint}; the attempts are recorded in {response_path}: fix the endpoint and publish again",
            recorded=ref,
        )
    return ref


def _previous_record(bundle: BundleStore, run_id: str, relpath: str) -> HttpRecord | None:
    """A redelivered publish whose POST already happened: use its record, send nothing again."""
    try:
        return HttpRecord.model_validate(bundle.read_json(run_id, relpath))
    except ArtifactMissing:
        return None
