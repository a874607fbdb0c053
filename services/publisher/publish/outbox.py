"""What a publish sends: the same files and the same manifest bytes to every target.

Bytes are the bundle artifacts' unchanged (hash-checked on read) and the manifest is canonical JSON with
no time in it, so the same report publishes the same names and bytes every time; the manifest's sha256 is
what a dry run records and a live publish must match (docs/lake.md#what-is-published)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from pydantic import Field, field_validator

from contracts import layout
from contracts.artifacts.report import ReportSummary
from contracts.envelope import ArtifactRef, RunId, Strict
from services.publisher.errors import ReportInputError
from services.publisher.pipeline import report_name
from services.runtime.bundle.bundle import ArtifactMissing, BundleError, BundleStore
from services.runtime.bundle.bundle_records import canonical_json
from services.shared.results import rejected_files, result_files

MANIFEST_VERSION: Final = 2
EVIDENCE_DIR = "evidence"
CONTENT_TYPES = {
    ".md": "text/markdown; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".png": "image/png",
    ".json": "application/json",
}


class DraftOverride(Strict):
    """The explicit, recorded decision to publish a DRAFT report to an external target anyway."""

    reason: str = Field(
        min_length=1, max_length=2000,
        description="Why this DRAFT may go out as it is; travels in the manifest and the bundle's records.",
    )

    @field_validator("reason")
    @classmethod
    def _said_something(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("a DRAFT override needs a reason in words, not blanks")
        return value


class SentFile(Strict):
    """One file of the report or its evidence, as sent (bytes unchanged from the bundle artifact)."""

    name: str = Field(
        description="Name at the target: report.html, plots/speedup.png, evidence/gate/DECISION.json, ..."
    )
    content_type: str = Field(description="MIME type it is sent with.")
    ref: ArtifactRef = Field(description="The bundle artifact whose bytes were (or would be) sent.")


class OutboxManifest(Strict):
    """manifest.json sent with the files."""

    version: Literal[2] = Field(default=MANIFEST_VERSION, description="Version of this manifest.")
    run_id: RunId = Field(description="The run the report is of.")
    draft: bool = Field(description="True when the report is marked DRAFT.")
    draft_reasons: list[str] = Field(description="Why it is a DRAFT; empty for a final report.")
    draft_override: DraftOverride | None = Field(description="The override a DRAFT was published on; None without one.")
    files: list[dict[str, str | int]] = Field(description="The report's files: name, sha256, size_bytes, content_type.")
    evidence: list[dict[str, str | int]] = Field(
        description="The evidence files under evidence/: name, sha256, size_bytes, content_type."
    )


@dataclass(frozen=True)
class Outbox:
    files: list[SentFile]  # the report's
    evidence: list[SentFile]
    data: dict[str, bytes]  # name -> bytes, report and evidence
    manifest: bytes
    summary: ReportSummary
    draft_override: DraftOverride | None

    @property
    def manifest_sha256(self) -> str:
        return hashlib.sha256(self.manifest).hexdigest()

    def objects(self) -> list[tuple[str, bytes, str]]:
        """(name, bytes, content type) in send order: the report, the evidence, the manifest last, so a
        reader who finds the manifest finds every file it lists."""
        sent = [(f.name, self.data[f.name], f.content_type) for f in (*self.files, *self.evidence)]
        return [*sent, (layout.PUBLISHED_MANIFEST, self.manifest, CONTENT_TYPES[".json"])]


def outbox(bundle: BundleStore, run_id: str, draft_override: DraftOverride | None = None) -> Outbox:
    """The rendered report's files and its evidence from the bundle (hash-checked on read)."""
    try:
        summary = ReportSummary.model_validate(bundle.read_json(run_id, layout.REPORT_SUMMARY))
    except ArtifactMissing:
        raise ReportInputError(
            f"run {run_id} has no rendered report ({layout.REPORT_SUMMARY}): render it first with "
            f"`specdec report {run_id}` or `specdec request report {run_id}`"
        ) from None
    data: dict[str, bytes] = {}
    report_paths = [*(layout.report_plot(p) for p in summary.plots), layout.REPORT_HTML, layout.REPORT_MARKDOWN]
    files = [_read(bundle, run_id, relpath, report_name(relpath), data=data) for relpath in report_paths]
    evidence = [_read(bundle, run_id, relpath, f"{EVIDENCE_DIR}/{relpath}", data=data)
                for relpath in _evidence(bundle, run_id)]
    manifest = OutboxManifest(
        run_id=run_id, draft=summary.draft, draft_reasons=summary.draft_reasons, draft_override=draft_override,
        files=[_entry(f) for f in files], evidence=[_entry(f) for f in evidence],
    )
    return Outbox(files=files, evidence=evidence, data=data, manifest=canonical_json(manifest), summary=summary,
                  draft_override=draft_override)


def _evidence(bundle: BundleStore, run_id: str) -> list[str]:
    run_dir = bundle.run_dir(run_id)
    trials = [p.relative_to(run_dir).as_posix()
              for p in (*result_files(bundle, run_id), *rejected_files(bundle, run_id))]
    try:
        bundle.ref(run_id, layout.DECISION)
        gate = [layout.DECISION]
    except ArtifactMissing:  # the gate never decided: the report says so as a DRAFT reason
        gate = []
    return sorted({*trials, *gate, layout.REPORT_SUMMARY})


def _read(bundle: BundleStore, run_id: str, relpath: str, name: str, *, data: dict[str, bytes]) -> SentFile:
    try:
        data[name] = bundle.read_bytes(run_id, relpath)
    except ArtifactMissing:
        raise ReportInputError(
            f"{relpath} of run {run_id} lies in the bundle but was never recorded (no hash): only recorded evidence is "
            "published; remove the stray file or record it with the step that writes it"
        ) from None
    except BundleError as exc:
        raise ReportInputError(f"{relpath} of run {run_id} cannot be published: {exc}") from None
    return SentFile(name=name, content_type=CONTENT_TYPES[Path(name).suffix], ref=bundle.ref(run_id, relpath))


def _entry(f: SentFile) -> dict[str, str | int]:
    return {"name": f.name, "sha256": f.ref.sha256, "size_bytes": f.ref.size_bytes, "content_type": f.content_type}
