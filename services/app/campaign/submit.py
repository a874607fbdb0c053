"""`specdec submit CAMPAIGN.yaml`: validate, create the run and its bundle, publish.

Three steps, each reusable on its own (the MCP server calls them one by one): `create_run`,
`store_campaign` and `publish_submitted`; `submit` is the three in a row. Reading and checking the
campaign file is services/app/campaign/prepare.py.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from pathlib import Path

import structlog

from contracts import layout
from contracts.campaign import Campaign
from contracts.envelope import ArtifactRef
from contracts.events import CampaignSubmitted
from services.app.campaign.prepare import CampaignRejected, PreparedCampaign, canonical_run_problems, prepare_campaign
from services.app.context import Session, operator
from services.app.runs.streams import untaken
from services.runtime.bundle.bundle import ArtifactMissing, BundleStore, InvalidPath
from services.runtime.bundle.bundle_paths import validate_run_id
from services.runtime.bundle.outbox import record_emitted
from services.runtime.errors import ConfigurationError

PRODUCER = "cli"


def target_build_record(checkpoint: Path) -> dict | None:
    """The checkpoint's build record (source, hashes, conversion versions), or None without one.

    A record that is not a JSON object is kept as its text under `unreadable`: the bundle
    says the checkpoint claimed a provenance it could not state, rather than nothing."""
    path = checkpoint / layout.TARGET_BUILD_FILE
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        record = json.loads(text)
    except ValueError:
        return {"unreadable": text[:2000], "path": str(path)}
    if not isinstance(record, dict):
        return {"unreadable": text[:2000], "path": str(path)}
    return {**record, "path": str(path)}


def new_run_id(family: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{family}-{stamp}-{secrets.token_hex(3)}"


# --- the three steps of a submit, reusable one by one (services/mcp calls them too) ---------------


class RunIdRefused(ConfigurationError):
    """A caller-chosen run ID that cannot be used: malformed, or already in use."""


def check_run_id(run_id: str) -> str:
    """A caller-chosen run ID, as the contracts accept one (contracts/envelope.py RUN_ID_PATTERN).

    The run ID is also the bundle folder, the Slurm job name part and the Kubernetes
    label value `experiment=<run-id>`, so the rule is the intersection of theirs."""
    try:
        return validate_run_id(run_id)
    except InvalidPath:
        raise RunIdRefused(
            f"experiment ID {run_id!r} cannot be a run ID: use 3-63 characters of a-z, 0-9 and '-', starting and "
            "ending with a letter or digit (it is also the experiment=<run-id> label of every job, object and process "
            "the run creates, and the name of its bundle folder)"
        ) from None


async def run_in_use(session: Session, run_id: str) -> str | None:
    """Why `run_id` is taken (its bundle folder exists, or an event of it is on the streams), or None."""
    if session.bundle.run_dir(run_id).exists():
        return f"run {run_id} already has a bundle folder at {session.bundle.run_dir(run_id)}"
    # Without a bundle folder the journal has taken none of the run's events: any are still untaken.
    events = await untaken(session.client, session.settings.stream_prefix, run_id)
    if events:
        return f"run {run_id} already has {len(events)} event(s) on {session.settings.stream_prefix}.*"
    return None


async def create_run(session: Session, family: str, experiment_id: str | None = None) -> str:
    """Create a new run's bundle folder: `experiment_id` when the caller gives one (checked,
    and refused when in use), else a generated ID. The folder is claimed with an exclusive
    mkdir, so two callers racing for one ID cannot both get it."""
    if experiment_id is None:
        run_id = new_run_id(family)
    else:
        run_id = check_run_id(experiment_id)
        reason = await run_in_use(session, run_id)
        if reason is not None:
            raise RunIdRefused(f"experiment ID {run_id} is in use: {reason}; choose another or leave it out")
    session.bundle.root.mkdir(parents=True, exist_ok=True)
    try:
        session.bundle.run_dir(run_id).mkdir()
    except FileExistsError:
        raise RunIdRefused(f"experiment ID {run_id} is in use: its bundle folder appeared at "
                           f"{session.bundle.run_dir(run_id)} meanwhile; choose another") from None
    session.bundle.create_run(run_id)  # the store's own checks (no symlink out of the root)
    return run_id


async def open_run(session: Session, run_id: str) -> str:
    """A run whose folder was created earlier and holds nothing yet (evidence first, the
    campaign later), or a new run of that ID; refused when it holds a campaign or has events."""
    run_id = check_run_id(run_id)
    if not session.bundle.exists(run_id):
        return await create_run(session, "", run_id)
    if _holds_campaign(session.bundle, run_id):
        raise RunIdRefused(f"run {run_id} already holds a campaign ({layout.CAMPAIGN}); a run is one campaign: "
                           "start a new run for another")
    if session.bundle.events_path(run_id).exists() or await untaken(
        session.client, session.settings.stream_prefix, run_id
    ):
        raise RunIdRefused(f"run {run_id} already has events; a campaign is stored before anything of its run runs: "
                           "start a new run")
    return run_id



def store_campaign(bundle: BundleStore, run_id: str, prepared: PreparedCampaign) -> ArtifactRef:
    """Write the campaign (as given and resolved), the operator's commands, the source
    revisions and the target's build record into the run's bundle; the campaign.json ref.
    A run holds one campaign: a second one is refused."""
    if _holds_campaign(bundle, run_id):
        raise ConfigurationError(f"run {run_id} already holds a campaign ({layout.CAMPAIGN}); a run is one campaign: "
                                 "start a new run for another")
    campaign = prepared.campaign
    log = structlog.get_logger().bind(service=PRODUCER, run_id=run_id)
    bundle.create_run(run_id)
    bundle.write_bytes(run_id, layout.CAMPAIGN_YAML, prepared.raw_bytes)
    ref = bundle.write_json(run_id, layout.CAMPAIGN, campaign)
    bundle.write_json(run_id, layout.OPERATOR_COMMANDS, campaign.commands)
    bundle.write_json(run_id, layout.OPERATOR_REVISIONS, campaign.source_revisions)
    build_record = target_build_record(Path(campaign.target.checkpoint))
    if build_record is not None:
        bundle.write_json(run_id, layout.TARGET_BUILD, build_record)
    if prepared.canonical is not None:
        bundle.write_json(run_id, layout.CANONICAL, prepared.canonical)
    if prepared.inert:
        bundle.write_json(run_id, layout.INERT, prepared.inert)
        for entry, reason in prepared.inert.items():
            log.warning("accepted but inert campaign field", field=entry, reason=reason)
    bundle.rebuild_manifest(run_id)
    return ref


def _holds_campaign(bundle: BundleStore, run_id: str) -> bool:
    try:
        bundle.ref(run_id, layout.CAMPAIGN)
    except ArtifactMissing:
        return False
    return True


async def publish_submitted(session: Session, run_id: str, campaign: Campaign, ref: ArtifactRef) -> CampaignSubmitted:
    """Publish campaign.submitted for a stored campaign: the pipeline starts. The event is recorded in the
    bundle first (services/runtime/bundle/outbox.py): should Redis lose it, the journal publishes it again."""
    event = CampaignSubmitted(run_id=run_id, producer=f"{PRODUCER}/{operator()}", campaign=campaign, campaign_ref=ref)
    event = record_emitted(session.bundle, event)
    await session.bus.publish(event)
    return event


async def submit(session: Session, path: Path, *, experiment_id: str | None = None) -> str:
    """Store the campaign in a new bundle before anything runs, then publish it."""
    if experiment_id is not None:
        check_run_id(experiment_id)  # a malformed ID is refused before the campaign is read
    prepared = prepare_campaign(path)
    if experiment_id is None and prepared.canonical is not None and prepared.canonical.experiment_id is not None:
        experiment_id = check_run_id(prepared.canonical.experiment_id)  # the file names its run
    problems = canonical_run_problems(prepared, experiment_id, session.bundle.root)
    if problems:
        raise CampaignRejected(path, problems)
    run_id = await create_run(session, prepared.campaign.family, experiment_id)
    ref = store_campaign(session.bundle, run_id, prepared)
    await publish_submitted(session, run_id, prepared.campaign, ref)
    return run_id
