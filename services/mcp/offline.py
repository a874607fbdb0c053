"""The tools that need no Redis: the gate over a run's bundle, the report, the publish.

Each is the CLI's path (services/cli/report_cmd.py, services/cli/gate_cmd.py's
`decide`) without its printing; `publish` calls the publisher's entry point for a
person or a tool (services/publisher/publish.py `publish_report`), as the MCP tool.
"""

from __future__ import annotations

from contracts import layout
from contracts.campaign import Campaign, GateSpec
from contracts.decision import Decision
from services.gate import decide, load_trials, split_by_role
from services.gate.results import load_rejected
from services.publisher.outbox import DraftOverride
from services.publisher.pipeline import RenderOutcome, render_run
from services.publisher.publish import Publication, parse_target, publish_report
from services.runtime.bundle import ArtifactMissing, BundleStore
from services.runtime.campaign import load_campaign
from services.runtime.errors import ConfigurationError
from services.runtime.settings import RuntimeSettings
from services.shared.results import rejected_files, result_files


def decide_run(bundle: BundleStore, run_id: str, spec: GateSpec | None) -> Decision:
    """What the gate decides over every trial result in the run's bundle, with `spec` or the campaign's gate;
    the rejected trials are named, never counted (as the gate service reads them)."""
    campaign = load_campaign(bundle, run_id)
    paths = result_files(bundle, run_id)
    if not paths:
        raise ConfigurationError(f"run {run_id} has no trial results in its bundle to gate: the bench writes them "
                                 f"(campaign_status shows where the run is)")
    baseline, candidates = split_by_role(load_trials(paths))
    rejected = load_rejected(rejected_files(bundle, run_id))
    for r in rejected:
        ident = r.trial.identity if r.trial is not None else None
        if ident is not None and ident.role == "candidate":
            candidates.setdefault(ident.cell_id, [])  # decided, on its counted trials (perhaps none)
    return decide(baseline, candidates, spec or campaign.gate, max_model_len=campaign.target.max_model_len,
                  rejected=rejected)


def render(bundle: BundleStore, run_id: str) -> RenderOutcome:
    """`specdec report RUN_ID`: render into the run's bundle."""
    return render_run(bundle, run_id)


async def publish(bundle: BundleStore, settings: RuntimeSettings, run_id: str, *, target: str | None, live: bool,
                  draft_override: DraftOverride | None) -> Publication:
    """`specdec publish RUN_ID [--target T] [--i-understand-this-publishes-externally]`: a dry run unless `live`;
    an external target (s3://, https://) goes live only after a dry run of the same report to it (the publisher's
    review point, services/publisher/publish_review.py)."""
    if target is None:
        try:
            target = Campaign.model_validate(bundle.read_json(run_id, layout.CAMPAIGN)).publish.target
        except ArtifactMissing:
            raise ConfigurationError(f"run {run_id} has no {layout.CAMPAIGN}: give target") from None
    parse_target(target)  # a bad target fails before anything else
    return await publish_report(bundle, run_id, target, acknowledged_by="mcp" if live else None,
                                draft_override=draft_override, settings=settings)
