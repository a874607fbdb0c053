"""The bundle's own records: per-artifact index records, the manifest, canonical JSON.

Pure: models and byte encodings only; the store in `services.runtime.bundle`
does the I/O.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import orjson
from pydantic import BaseModel, Field

from contracts import layout
from contracts.envelope import RunId, Sha256, Strict
from services.runtime.bundle_paths import InvalidContent

INDEX_RECORD_VERSION = 1
MANIFEST_VERSION = 1
# The stored campaign (a JSON dump of contracts.campaign.Campaign) the manifest
# reads the operator's commands and the source revisions from.
CAMPAIGN_RELPATH = layout.CAMPAIGN

_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS


class IndexRecord(Strict):
    """What the store recorded for one artifact, stored under `<run>/.index/`."""

    version: Literal[1] = Field(default=INDEX_RECORD_VERSION, description="Index record format version.")
    path: str = Field(description="Artifact path relative to the run's bundle folder.")
    sha256: Sha256 = Field(description="Hex sha256 of the artifact's bytes when recorded.")
    size_bytes: int = Field(ge=0, description="Size of the artifact in bytes when recorded.")


class ManifestArtifact(Strict):
    """One artifact as listed by the manifest."""

    path: str = Field(description="Artifact path relative to the run's bundle folder.")
    sha256: Sha256 = Field(description="Hex sha256 of the artifact's bytes.")
    size_bytes: int = Field(ge=0, description="Size of the artifact in bytes.")


class Manifest(Strict):
    """manifest.json: derived from the index, rebuilt whole; never an artifact itself."""

    version: Literal[1] = Field(default=MANIFEST_VERSION, description="Manifest format version.")
    run_id: RunId = Field(description="The run this bundle belongs to.")
    commands: dict[str, Any] | None = Field(
        description="The operator's commands as stored in campaign.json; null when no campaign is stored."
    )
    source_revisions: dict[str, Any] | None = Field(
        description="Source revisions as stored in campaign.json; null when no campaign is stored."
    )
    artifacts: list[ManifestArtifact] = Field(description="Every recorded artifact, sorted by path.")


def index_name(relpath: str) -> str:
    """File name of an artifact's index record.

    A hash of the path, not the path itself: it keeps the index flat, makes no
    two paths collide ('a.json' the file vs 'a.json/' a folder), and bounds the
    name length whatever the depth of the artifact.
    """
    return hashlib.sha256(relpath.encode()).hexdigest() + ".json"


def _default(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json", by_alias=True)
    raise TypeError(f"type {type(obj).__name__} is not JSON-serialisable")


def canonical_json(obj: Any) -> bytes:
    """The one byte encoding of JSON artifacts: indented, sorted keys, trailing newline.

    Same data -> same bytes, so a retried handler rewriting its JSON artifact
    hits the write-once check as a no-op, not as a conflict.
    """
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json", by_alias=True)
    try:
        return orjson.dumps(obj, default=_default, option=_JSON_OPTIONS) + b"\n"
    except orjson.JSONEncodeError as err:
        raise InvalidContent(f"cannot store as JSON: {err}; pass plain data or a pydantic model") from err


def build_manifest(run_id: str, records: list[IndexRecord], campaign: Any | None) -> Manifest:
    """The manifest of a run from its index records and its stored campaign (or None).

    A campaign that is not a mapping, or lacks a key, yields null for that
    field: the manifest still lists every artifact.
    """
    mapping = campaign if isinstance(campaign, dict) else {}
    commands = mapping.get("commands")
    revisions = mapping.get("source_revisions")
    return Manifest(
        run_id=run_id,
        commands=commands if isinstance(commands, dict) else None,
        source_revisions=revisions if isinstance(revisions, dict) else None,
        artifacts=[
            ManifestArtifact(path=r.path, sha256=r.sha256, size_bytes=r.size_bytes)
            for r in sorted(records, key=lambda r: r.path)
        ],
    )
