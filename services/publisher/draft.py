"""DRAFT marking: why a report cannot be read as final evidence.

A report is marked DRAFT (in its title and on every section, HTML and
Markdown alike) when any of these holds; every reason that holds is listed:

1. a campaign step is missing or failed (its last event in the journal is
   `<step>.failed` / `capacity.unavailable`, or no event settles it), or the
   bundle has no journal at all; `bench.completed` lists failed cells;
2. the gate decided `inconclusive`, or no valid DECISION.json exists;
3. a number's identity is incomplete: a trial without specdec's identity
   block, an unknown source revision, identity that differs between trials
   of one arm, a candidate without a measured named baseline, fewer trials
   with results than declared, identity fields the gate could not compare;
4. the matrix was exploratory (fewer than 3 trials per cell);
5. an input could not be read (result file, campaign.json, DECISION.json).

Pure: a function of `CampaignData`.
"""

from __future__ import annotations

from contracts import layout
from services.publisher.model import CampaignData


def draft_reasons(data: CampaignData) -> list[str]:
    """Every reason the report is a DRAFT, in words; empty for a final report."""
    return [*_step_reasons(data), *_gate_reasons(data), *_identity_reasons(data), *_other_reasons(data)]


def _step_reasons(data: CampaignData) -> list[str]:
    reasons = []
    if not data.journal_present:
        reasons.append(f"no {layout.EVENTS} in the bundle: the steps that produced this evidence cannot be verified")
    for status in data.steps:
        if status.state == "failed":
            reasons.append(f"step {status.step} failed ({status.detail})")
        elif status.state == "missing" and data.journal_present and not (status.step == "gate" and data.decision is None):
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
    reasons = [f"identity of {arm.key} is incomplete: {problem}" for arm in data.arms for problem in arm.identity_problems]
    if data.decision is not None and data.decision.unchecked_identity_fields:
        fields = ", ".join(data.decision.unchecked_identity_fields)
        reasons.append(f"the gate could not compare identity fields between the arms: {fields}")
    return reasons


def _other_reasons(data: CampaignData) -> list[str]:
    reasons = []
    if data.bench_exploratory:
        reasons.append("the matrix is exploratory (fewer than 3 trials per cell): every figure is a DRAFT")
    if data.campaign is None and not any(p.startswith(layout.CAMPAIGN) for p in data.problems):
        reasons.append(f"no {layout.CAMPAIGN} in the bundle: the campaign's gate spec and revisions are unknown")
    reasons.extend(f"unreadable input: {problem}" for problem in data.problems)
    return reasons
