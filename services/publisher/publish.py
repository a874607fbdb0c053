"""Publish a rendered report: to a folder (`file://`) or an HTTP(S) endpoint, dry run by default.

What is sent: the report's files as rendered into the bundle, bytes unchanged
(`report.md`, `report.html`, `plots/*.png`), plus `manifest.json` listing each
file's name, sha256 and size, the run ID and the DRAFT flag and reasons. The
hashes in `report.published` are those of the bundle artifacts that were (or
would be) sent. A DRAFT report can be published: it carries its marking on
every page and in the manifest.

Targets:
- `file://DIR`, DIR relative (`file://published`, the campaign default): a
  folder inside the run's bundle, `<bundle_root>/<run_id>/DIR/`; the files
  become write-once bundle artifacts. DIR must be a valid bundle path (no
  `..`, no leading '.').
- `file:///ABS/DIR`: `/ABS/DIR/<run_id>/` (one folder per run, so runs never
  overwrite each other); write-once too: a file already there with other bytes
  stops the publish (PublishConflict) and nothing is overwritten.
- `http://` or `https://`: one multipart POST, with retries (transport.py).

Safe by default: a publish is a dry run unless it is acknowledged
(`i_understand_this_publishes_externally: true` from the campaign's
acknowledgements in the service; the `--i-understand-this-publishes-externally`
flag in `specdec publish`). A request without it is a dry run, never an error
and never a send. A dry run sends and writes nothing at the target.

Records (when `record` is on, i.e. in the service and for a live CLI
publish): `publish/<key>/publication.json` (Publication) and, for HTTP,
`publish/<key>/response.json` (every attempt). A redelivered request with the
same key finds them and sends nothing again.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx
from pydantic import Field

from contracts import layout
from contracts.envelope import ArtifactRef, RunId, Strict
from contracts.report import ReportSummary
from services.publisher.errors import PublishConflict, PublishFailed, PublishTargetError, ReportInputError
from services.publisher.pipeline import report_name
from services.publisher.transport import HttpRecord, Part, RetryPolicy, Sleep, post_report
from services.runtime.bundle import ArtifactConflict, ArtifactMissing, BundleStore, InvalidPath
from services.runtime.bundle_paths import validate_relpath
from services.runtime.bundle_records import canonical_json

PUBLICATION_VERSION = 1
CONTENT_TYPES = {".md": "text/markdown; charset=utf-8", ".html": "text/html; charset=utf-8", ".png": "image/png"}
ACK_FIELD = "i_understand_this_publishes_externally"
Acknowledger = Literal["campaign", "cli"]


@dataclass(frozen=True)
class FileTarget:
    relpath: str | None  # inside the run's bundle
    directory: Path | None  # absolute folder; the run's files go under <directory>/<run_id>/


@dataclass(frozen=True)
class HttpTarget:
    url: str


def parse_target(target: str) -> FileTarget | HttpTarget:
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
    raise PublishTargetError(f"publish target {target!r} must start with file://, http:// or https://")


class SentFile(Strict):
    """One file of the report, as sent (bytes unchanged from the bundle artifact)."""

    name: str = Field(description="Name under report/, e.g. report.html or plots/speedup.png.")
    content_type: str = Field(description="MIME type it is sent with.")
    ref: ArtifactRef = Field(description="The bundle artifact whose bytes were (or would be) sent.")


class OutboxManifest(Strict):
    """manifest.json sent with the files."""

    version: Literal[1] = Field(default=PUBLICATION_VERSION, description="Version of this manifest.")
    run_id: RunId = Field(description="The run the report is of.")
    draft: bool = Field(description="True when the report is marked DRAFT.")
    draft_reasons: list[str] = Field(description="Why it is a DRAFT; empty for a final report.")
    files: list[dict[str, str | int]] = Field(description="Each file: name, sha256, size_bytes, content_type.")


class Publication(Strict):
    """What a publish did (or would do): publish/<key>/publication.json."""

    version: Literal[1] = Field(default=PUBLICATION_VERSION, description="Version of this record.")
    run_id: RunId = Field(description="The run.")
    key: str = Field(description="Idempotency key of this publish (the request's event ID, or cli-<time>).")
    target: str = Field(description="The target as given.")
    destination: str = Field(description="Where the files go: a folder path or the URL.")
    dry_run: bool = Field(description="True when nothing was sent.")
    mode_reason: str = Field(description="Why it was a dry run, or who acknowledged the live publish.")
    acknowledged_by: Acknowledger | None = Field(description="Source of the acknowledgement; None without one.")
    draft: bool = Field(description="True when the published report is a DRAFT.")
    files: list[SentFile] = Field(description="Every file sent (or that would be), with its hash.")
    written: list[str] = Field(description="file:// targets: the paths written (bundle URIs or absolute paths).")
    response: ArtifactRef | None = Field(description="HTTP targets: the recorded attempts (response.json).")


@dataclass(frozen=True)
class Outbox:
    files: list[SentFile]
    data: dict[str, bytes]  # name -> bytes
    manifest: bytes
    summary: ReportSummary


def outbox(bundle: BundleStore, run_id: str) -> Outbox:
    """The rendered report's files from the bundle (hash-checked on read)."""
    try:
        summary = ReportSummary.model_validate(bundle.read_json(run_id, layout.REPORT_SUMMARY))
    except ArtifactMissing:
        raise ReportInputError(
            f"run {run_id} has no rendered report ({layout.REPORT_SUMMARY}): render it first with `specdec report {run_id}` "
            f"or `specdec request report {run_id}`"
        ) from None
    relpaths = [*(layout.report_plot(p) for p in summary.plots), layout.REPORT_HTML, layout.REPORT_MARKDOWN]
    files, data = [], {}
    for relpath in relpaths:
        name = report_name(relpath)
        data[name] = bundle.read_bytes(run_id, relpath)
        content_type = CONTENT_TYPES[Path(name).suffix]
        files.append(SentFile(name=name, content_type=content_type, ref=bundle.ref(run_id, relpath)))
    manifest = OutboxManifest(
        run_id=run_id, draft=summary.draft, draft_reasons=summary.draft_reasons,
        files=[{"name": f.name, "sha256": f.ref.sha256, "size_bytes": f.ref.size_bytes, "content_type": f.content_type}
               for f in files],
    )
    return Outbox(files=files, data=data, manifest=canonical_json(manifest), summary=summary)


def mode(acknowledged_by: Acknowledger | None, *, force_dry_run: bool) -> tuple[bool, str]:
    """(dry_run, why) for a publish request."""
    if force_dry_run:
        return True, "dry run requested"
    if acknowledged_by is None:
        return True, (f"dry run: a live publish needs {ACK_FIELD}: true (the campaign's acknowledgements, or "
                      "specdec publish --i-understand-this-publishes-externally)")
    return False, f"live: {ACK_FIELD} given by the {acknowledged_by}"


async def publish_run(
    bundle: BundleStore,
    run_id: str,
    *,
    target: str,
    key: str,
    acknowledged_by: Acknowledger | None,
    force_dry_run: bool = False,
    record: bool = True,
    policy: RetryPolicy = RetryPolicy(),
    sleep: Sleep = asyncio.sleep,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Publication:
    """Publish (or dry-run) the run's rendered report to `target`; see the module doc."""
    parsed = parse_target(target)
    record_path = layout.publication(key)
    if record:
        try:
            return Publication.model_validate(bundle.read_json(run_id, record_path))
        except ArtifactMissing:
            pass
    box = outbox(bundle, run_id)
    dry_run, why = mode(acknowledged_by, force_dry_run=force_dry_run)
    destination = _destination(bundle, run_id, parsed)
    written: list[str] = []
    response: ArtifactRef | None = None
    if not dry_run and isinstance(parsed, FileTarget):
        written = _write_files(bundle, run_id, parsed, box)
    elif not dry_run and isinstance(parsed, HttpTarget):
        response = await _send_http(bundle, run_id, parsed, box, key, policy=policy, sleep=sleep, transport=transport,
                                    record=record)
    publication = Publication(
        run_id=run_id, key=key, target=target, destination=destination, dry_run=dry_run, mode_reason=why,
        acknowledged_by=None if dry_run else acknowledged_by, draft=box.summary.draft, files=box.files,
        written=written, response=response,
    )
    if record:
        bundle.write_json(run_id, record_path, publication)
    return publication


def _destination(bundle: BundleStore, run_id: str, parsed: FileTarget | HttpTarget) -> str:
    if isinstance(parsed, HttpTarget):
        return parsed.url
    if parsed.relpath is not None:
        return str(bundle.run_dir(run_id) / parsed.relpath)
    return str(parsed.directory / run_id)  # type: ignore[operator]


def _write_files(bundle: BundleStore, run_id: str, target: FileTarget, box: Outbox) -> list[str]:
    files = {**box.data, layout.PUBLISHED_MANIFEST: box.manifest}
    if target.relpath is not None:
        try:
            return [bundle.write_bytes(run_id, f"{target.relpath}/{name}", data).uri for name, data in files.items()]
        except ArtifactConflict as exc:
            raise PublishConflict(f"{exc}; publish to another folder") from None
    folder = target.directory / run_id  # type: ignore[operator]
    return [str(_write_once(folder / name, data)) for name, data in files.items()]


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
    bundle: BundleStore, run_id: str, target: HttpTarget, box: Outbox, key: str, *,
    policy: RetryPolicy, sleep: Sleep, transport: httpx.AsyncBaseTransport | None, record: bool,
) -> ArtifactRef | None:
    response_path = layout.publication_response(key)
    previous = _previous_record(bundle, run_id, response_path) if record else None
    result = previous or await post_report(
        target.url,
        manifest=box.manifest,
        parts=[Part(f.name, box.data[f.name], f.content_type) for f in box.files],
        headers={"X-Specdec-Run-Id": run_id, "X-Specdec-Draft": "true" if box.summary.draft else "false"},
        idempotency_key=f"{run_id}-{key}",
        policy=policy,
        sleep=sleep,
        transport=transport,
    )
    ref = bundle.write_json(run_id, response_path, result) if record else None
    if result.outcome != "accepted":
        final = result.final
        got = f"HTTP {final.status}" if final.status is not None else final.error
        raise PublishFailed(
            f"{target.url} did not accept the report after {len(result.attempts)} attempt(s) ({result.outcome}, last: "
            f"{got}); the attempts are recorded in {response_path}: fix the endpoint and publish again",
            recorded=ref,
        )
    return ref


def _previous_record(bundle: BundleStore, run_id: str, relpath: str) -> HttpRecord | None:
    """A redelivered publish whose POST already happened: use its record, send nothing again."""
    try:
        return HttpRecord.model_validate(bundle.read_json(run_id, relpath))
    except ArtifactMissing:
        return None
