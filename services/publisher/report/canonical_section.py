"""The report's "Campaign file" section: what a canonical matrix file said beyond the numbers.

`canonical.json` (contracts/campaign/canonical.py) is stored at submit for a campaign in the
workflow's canonical shape: its name, description and provenance, and per cell the
operator's notes, identity labels, exact serve command, the engine arguments vLLM's
own parser read from it, and every token launched other than declared; the value of a
secret-bearing flag (`--hf-token`, `--api-key`) is masked (services/shared/secret_args.py). A campaign
in specdec's own shape has none, and the section is left out.
"""

from __future__ import annotations

import json
import shlex

from pydantic import ValidationError

from contracts import layout
from contracts.campaign.canonical import CanonicalRecord
from services.publisher.report.document import Bullets, Paragraph, Section, Table, Text
from services.runtime.bundle.bundle import ArtifactMissing, BundleError, BundleStore
from services.shared.secret_args import mask_argv, mask_document, mask_text

TITLE = "Campaign file: the operator's cells and exact commands"


def read_canonical(bundle: BundleStore, run_id: str, problems: list[str]) -> CanonicalRecord | None:
    """The run's canonical record; None for a campaign in specdec's own shape (a broken one is a problem)."""
    try:
        return CanonicalRecord.model_validate(bundle.read_json(run_id, layout.CANONICAL))
    except ArtifactMissing:
        return None
    except (BundleError, ValidationError) as exc:
        problems.append(f"{layout.CANONICAL}: {exc}")
        return None


def read_intent(bundle: BundleStore, run_id: str, problems: list[str]) -> str | None:
    """What the campaign is for, as the workflow's evidence_init was told (intent.json); None without one."""
    try:
        record = bundle.read_json(run_id, layout.INTENT)
    except ArtifactMissing:
        return None
    except BundleError as exc:
        problems.append(f"{layout.INTENT}: {exc}")
        return None
    return str(record.get("intent")) if isinstance(record, dict) and record.get("intent") else None


def intent_section(intent: str | None) -> list[Section]:
    if not intent:
        return []
    return [Section("intent", "Intent",
                    (Paragraph((f"What this campaign is for, as stated at evidence_init: {intent}",)),))]


def canonical_section(record: CanonicalRecord | None) -> list[Section]:
    if record is None:
        return []
    head: list[Text] = [(f"name: {record.name}",)]
    if record.description:
        head.append((f"description: {record.description}",))
    if record.provenance:
        head.append((f"provenance: {json.dumps(record.provenance, sort_keys=True)}",))
    head.append((f"comparator baseline: {record.comparator_baseline} (every candidate is compared with it)",))
    rows = []
    for cell in record.cells:
        labels = ", ".join(f"{k}={v}" for k, v in cell.identity.items() if v not in (None, {}, ""))
        # A secret-bearing flag's value (--hf-token, --api-key) is masked: the report is published.
        changes = "; ".join(mask_text(f"{c.declared or '(appended)'} -> {c.launched}") for c in cell.rewrites) or "none"
        read = (", ".join(f"{k}={json.dumps(v)}" for k, v in mask_document(cell.engine_args).items())
                if cell.parsed_by_vllm else "not a `vllm serve` command: declared in specdec's keys")
        rows.append(((cell.cell_id,), (cell.role,), (cell.notes or "",), (labels,),
                     (shlex.join(mask_argv(cell.serve_cmd)),), (read,), (changes,)))
    table = Table(("cell", "role", "notes", "identity labels", "serve command as declared",
                   "what vLLM's parser read", "launched otherwise (declared -> launched)"), tuple(rows),
                  identity_column=False)
    note = Paragraph(("Each command ran as declared apart from the changes listed; the engine read-back section "
                      "shows what each running engine reported.",))
    return [Section("campaign-file", TITLE, (Bullets(tuple(head)), table, note))]
