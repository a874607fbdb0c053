"""DRAFT marking: why a report cannot be read as final evidence.

Every reason that holds is listed (docs/publisher.md#draft); a weak or incomplete campaign is a DRAFT,
never an error. Pure: a function of `CampaignData`."""

from __future__ import annotations

from contracts import layout
from contracts.artifacts.suffix import SUFFIX_VLLM_DEFAULTS
from contracts.campaign import Matrix
from services.publisher.report.model import CampaignData


def draft_reasons(data: CampaignData) -> list[str]:
    """Every reason the report is a DRAFT, in words; empty for a final report."""
    return [*_step_reasons(data), *_gate_reasons(data), *_identity_reasons(data), *_other_reasons(data),
            *_rejected_reasons(data), *_engine_reasons(data), *_suffix_cache_reasons(data)]


def _step_reasons(data: CampaignData) -> list[str]:
    reasons = []
    if not data.journal_present:
        reasons.append(f"no {layout.EVENTS} in the bundle: the steps that produced this evidence cannot be verified")
    for status in data.steps:
        if status.state == "failed":
            reasons.append(f"step {status.step} failed ({status.detail})")
        elif (status.state == "missing" and data.journal_present
              and not (status.step == "gate" and data.decision is None)):
            # (a missing gate without a decision is said once, by the gate reasons below)
            reasons.append(f"step {status.step} is missing: no event in the journal settles it")
    for cell, why in sorted(data.failed_cells.items()):
        reasons.append(f"bench cell {cell} failed: {why}")
    return reasons


def _gate_reasons(data: CampaignData) -> list[str]:
    if data.decision is None:
        return [f"no valid gate decision ({layout.DECISION}): nothing is promoted or rejected"]
    if data.decision.decision == "inconclusive":
        return [f"the gate is inconclusive: {data.decision.reasons[0].removeprefix('inconclusive: ')}"]
    return []


def _identity_reasons(data: CampaignData) -> list[str]:
    reasons = [f"identity of {arm.key} is incomplete: {problem}"
               for arm in data.arms for problem in arm.identity_problems]
    if data.decision is not None and data.decision.unchecked_identity_fields:
        fields = ", ".join(data.decision.unchecked_identity_fields)
        reasons.append(f"the gate could not compare identity fields between the arms: {fields}")
    return reasons


def _other_reasons(data: CampaignData) -> list[str]:
    reasons = []
    if data.bench_exploratory:
        reasons.append("the matrix is exploratory (matrix.exploratory: true): every figure is a DRAFT")
    reasons.extend(_own_dataset_reasons(data))
    if data.campaign is None and not any(p.startswith(layout.CAMPAIGN) for p in data.problems):
        reasons.append(f"no {layout.CAMPAIGN} in the bundle: the campaign's gate spec and revisions are unknown")
    reasons.extend(f"unreadable input: {problem}" for problem in data.problems)
    return reasons


def _own_dataset_reasons(data: CampaignData) -> list[str]:
    """A campaign with traffic is measured on its matched corpus; an operator bench that brings its own dataset
    measures something else, and the report says so (its promote stands for that dataset only)."""
    if data.canonical is None or data.campaign is None or data.campaign.shapes_only:
        return []
    own = sorted({cell.bench_dataset for cell in data.canonical.cells if cell.bench_dataset})
    if not own:
        return []
    return [f"the campaign has traffic, but its cells were benched on the operator's own dataset ({', '.join(own)}), "
            "not on the matched corpus's heldout prompts: a promote holds for that dataset only"]


def _rejected_reasons(data: CampaignData) -> list[str]:
    if not data.rejected:
        return []
    which = "; ".join(f"{r.path} ({'; '.join(r.reasons)})" for r in data.rejected)
    return [f"{len(data.rejected)} trial(s) rejected (spec-decode counters contradict the declared speculation) and "
            f"kept out of every figure: {which}"]


def _engine_reasons(data: CampaignData) -> list[str]:
    reasons = []
    for row in data.engine:
        launch = f"cell {row.cell_id}" + (f" launch {row.launch}" if row.launch is not None else "")
        if row.check is None:
            reasons.append(f"the engine's effective config of {launch} was not read back: what it served is unverified")
            continue
        for m in row.check.mismatches:
            reasons.append(f"the engine of {launch} serves {m.field}={m.effective!r}, the cell declares {m.declared!r}")
    return reasons


def _suffix_cache_reasons(data: CampaignData) -> list[str]:
    if data.campaign is None or not isinstance(data.campaign.matrix, Matrix):
        return []
    reasons = []
    for cell in data.campaign.matrix.cells:
        spec = cell.serving.speculative
        if spec is None or spec.method != "suffix" or spec.suffix_decoding_max_cached_requests == 0:
            continue
        size = spec.suffix_decoding_max_cached_requests
        cache = (f"{size:,} requests" if size is not None
                 else f"vLLM's default, {SUFFIX_VLLM_DEFAULTS['suffix_decoding_max_cached_requests']:,} requests")
        reasons.append(
            f"suffix cell {cell.cell_id} caches earlier requests' outputs "
            f"(suffix_decoding_max_cached_requests: {cache}) while every trial and warm-up replays the same prompts: "
            "its acceptance and speed include drafts from its "
            "own answers to those prompts in earlier windows; declare suffix_decoding_max_cached_requests: 0 to "
            "measure what the traffic gives")
    return reasons
