"""Validate: every check submit makes on a campaign file, with nothing created, stored or published.

For a CI pipeline that lints campaigns, and for a person who wants to see how
specdec read their cells before any run exists: the problems (all at once, as
submit names them), the warnings, the accepted-but-inert fields, and each cell's
declared serving config as specdec resolved it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from contracts.campaign import Campaign, TrafficShapes
from contracts.campaign.canonical import CanonicalRecord, Rewrite
from contracts.envelope import Strict
from services.app.campaign.prepare import CampaignRejected, prepare_campaign
from services.app.campaign.roots import FileRoots
from services.shared.secret_args import mask_argv, mask_document


class DeclaredCell(Strict):
    """One cell as specdec understood it: what it would serve and measure."""

    cell_id: str = Field(description="The cell's ID.")
    role: str = Field(description="standing (the baseline) or candidate.")
    concurrency: list[int] = Field(description="The concurrency levels it is measured at.")
    regime: str = Field(description="warm, cold or warm-interleaved.")
    trials: int = Field(description="Trials per concurrency level.")
    serving: dict[str, Any] = Field(description="The declared serving config, resolved (model path made absolute, "
                                    "the target's checkpoint where unset): what the launch passes to vLLM and the "
                                    "engine read-back checks.")
    serve_cmd: list[str] | None = Field(description="The operator's serve argv template, as given (a secret-bearing "
                                        "argument's value masked); None: specdec builds the command from `serving`.")
    bench_cmd: list[str] | None = Field(description="The operator's bench argv template, as given; None: specdec's "
                                        "own load generator.")
    engine_args: dict[str, Any] | None = Field(
        default=None, description="A canonical file's `vllm serve` cell: every argument its command sets, as vLLM's "
        "own parser read it (vLLM's defaults hold for the rest); None otherwise.")
    launch_changes: list[Rewrite] = Field(
        default_factory=list, description="Each token of the operator's serve command that is launched otherwise "
        "(declared -> launched, and why); empty when launched as written.")


class Validation(Strict):
    """What submit would say of a campaign file, without creating a run."""

    campaign: str = Field(description="The file validated.")
    accepted: bool = Field(description="True when submit would accept it (no problem).")
    problems: list[str] = Field(description="Every reason it would be refused, all at once; empty when accepted.")
    warnings: list[str] = Field(description="What would not stop it but changes what runs or what is recorded.")
    inert: dict[str, str] = Field(description="Fields set that change nothing, with the reason (contracts/inert.py); "
                                  "submit records them in the bundle's inert.json.")
    cells: list[DeclaredCell] = Field(description="Each cell's declared config; empty when the file cannot be read "
                                      "as a campaign.")


def validate(path: Path, roots: FileRoots | None = None) -> Validation:
    """Run every check submit runs on the file at `path`; stores and publishes nothing. `roots`: the folders
    the caller may read from (OutsideRoots for a file elsewhere; the MCP server's, none for the CLI)."""
    try:
        prepared = prepare_campaign(path, roots)
    except CampaignRejected as rejected:
        return Validation(campaign=str(path), accepted=False, problems=rejected.problems, warnings=[], inert={},
                          cells=[])
    campaign = prepared.campaign
    warnings = _warnings(campaign, prepared.inert) + _unchecked(prepared.canonical)
    return Validation(campaign=str(path), accepted=True, problems=[], warnings=warnings,
                      inert=prepared.inert, cells=declared_cells(campaign, prepared.canonical))


def declared_cells(campaign: Campaign, canonical: CanonicalRecord | None = None) -> list[DeclaredCell]:
    """Each cell of a prepared (inline-matrix) campaign as it would be launched."""
    cells = campaign.matrix.cells  # type: ignore[union-attr]  # prepare_campaign stores the matrix inline
    records = {record.cell_id: record for record in canonical.cells} if canonical else {}
    target = campaign.target.checkpoint
    found = []
    for cell in cells:
        serving = cell.serving.model_dump(mode="json")
        serving["model"] = serving["model"] or target
        record = records.get(cell.cell_id)
        found.append(DeclaredCell(
            cell_id=cell.cell_id, role=cell.role, concurrency=cell.concurrency, regime=cell.regime, trials=cell.trials,
            serving=serving, serve_cmd=_argv(cell.vllm_sweep.serve_cmd), bench_cmd=_argv(cell.vllm_sweep.bench_cmd),
            engine_args=mask_document(record.engine_args) if record is not None and record.parsed_by_vllm else None,
            launch_changes=record.rewrites if record is not None else []))
    return found


def _argv(template: Any) -> list[str] | None:
    # Shown (CLI, MCP): a secret-bearing argument's value masked (docs/configuration.md).
    return None if template is None else mask_argv(template.root)


def _warnings(campaign: Campaign, inert: dict[str, str]) -> list[str]:
    found = [f"accepted but inert: {field}: {reason}" for field, reason in inert.items()]
    if isinstance(campaign.traffic, TrafficShapes):
        found.append("traffic gives named workload shapes only: there is no traffic to learn from, so corpus and "
                     "training will be recorded as skipped (a candidate must need no training or name a draft)")
    return found


def _unchecked(canonical: CanonicalRecord | None) -> list[str]:
    # Labels left to vLLM or to a checkpoint not here to read: accepted, and said (docs/configuration.md).
    return [f"cells[{record.cell_id}].{label} {why}" for record in (canonical.cells if canonical else [])
            for label, why in record.unchecked_labels.items()]
