"""`specdec submit CAMPAIGN.yaml`: validate, create the run and its bundle, publish."""

from __future__ import annotations

import secrets
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import structlog
import yaml
from pydantic import ValidationError

from contracts import layout
from contracts.campaign import Campaign, Matrix, MatrixFile, TrafficFile, missing_inputs
from contracts.events import CampaignSubmitted
from contracts.inert import inert_fields_set
from contracts.templates import template_problems
from services.cli.context import Cli, operator
from services.runtime.errors import ConfigurationError

PRODUCER = "cli"


class CampaignRejected(ConfigurationError):
    """The campaign cannot run; `problems` names every reason."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"campaign {path} cannot be submitted; nothing was published:\n{lines}")


def load_campaign(path: Path) -> tuple[Campaign, bytes]:
    """Parse and validate a campaign file, naming every problem at once."""
    try:
        raw_bytes = path.read_bytes()
    except OSError as exc:
        raise CampaignRejected(path, [f"cannot read the file: {exc.strerror}"]) from None
    try:
        data: Any = yaml.safe_load(raw_bytes)
    except yaml.YAMLError as exc:
        raise CampaignRejected(path, [f"not valid YAML: {exc}"]) from None
    problems = [f"missing: {item}" for item in missing_inputs(data)]
    try:
        campaign = Campaign.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors():
            where = ".".join(str(p) for p in error["loc"]) or "(campaign)"
            if error["type"] == "missing":
                continue  # already named by missing_inputs, in words
            message = error["msg"].removeprefix("Value error, ")
            if message.startswith("campaign lacks required inputs"):
                continue
            problems.append(f"invalid: {where}: {message}")
        if not problems:
            problems.append(f"invalid: {exc}")
        raise CampaignRejected(path, problems) from None
    problems += _missing_files(campaign)
    problems += _template_problems(campaign)
    if problems:
        raise CampaignRejected(path, problems)
    return campaign, raw_bytes


def _template_problems(campaign: Campaign) -> list[str]:
    """Operator serve and bench templates that would drop or contradict a declared
    field (contracts/templates.py), refused before anything is stored. A matrix
    file is read here for that, from where submit runs; a missing one is named by
    _missing_files, an unreadable one here."""
    if isinstance(campaign.matrix, Matrix):
        return [f"template: {p}" for p in template_problems(campaign, campaign.matrix)]
    matrix_path = Path(campaign.matrix.path)
    if not matrix_path.is_file():
        return []
    try:
        matrix = Matrix.model_validate(yaml.safe_load(matrix_path.read_bytes()))
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        return [f"invalid: matrix.path {matrix_path}: {exc}"]
    return [f"template: {p}" for p in template_problems(campaign, matrix, cells_at=f"{matrix_path}: cells")]


def _missing_files(campaign: Campaign) -> list[str]:
    """Input files the campaign names that are not there: refused now rather than
    failing the run at its first step (paths resolve from where submit runs)."""
    problems = []
    if isinstance(campaign.traffic, TrafficFile) and not Path(campaign.traffic.path).is_file():
        problems.append(f"missing file: traffic.path {campaign.traffic.path} (from {Path.cwd()}): "
                        "give the traffic JSONL the campaign is for")
    if isinstance(campaign.matrix, MatrixFile) and not Path(campaign.matrix.path).is_file():
        problems.append(f"missing file: matrix.path {campaign.matrix.path} (from {Path.cwd()})")
    return problems


def _absolute(value: str | None, base: Path) -> str | None:
    """A relative path that exists under `base` becomes absolute; anything else
    (absolute paths, model names, placeholders) is left as written."""
    if not value or value.startswith("{") or Path(value).is_absolute():
        return value
    candidate = base / value
    return str(candidate.resolve()) if candidate.exists() else value


def absolutize(campaign: Campaign, base: Path) -> Campaign:
    """Resolve the campaign's relative paths against the submitting directory,
    so services started elsewhere read the same files. The original YAML is
    kept verbatim in the bundle beside the resolved campaign.json."""
    data = campaign.model_dump(by_alias=True)
    data["target"]["checkpoint"] = _absolute(data["target"]["checkpoint"], base)
    data["target"]["tokenizer"] = _absolute(data["target"]["tokenizer"], base)
    if data["commands"].get("train"):
        data["commands"]["train"]["kubernetes_job"] = _absolute(data["commands"]["train"]["kubernetes_job"], base)
    if data["commands"].get("serve_pod_template"):
        data["commands"]["serve_pod_template"] = _absolute(data["commands"]["serve_pod_template"], base)
    if "path" in data["traffic"]:
        data["traffic"]["path"] = _absolute(data["traffic"]["path"], base)
    if "path" in data["matrix"]:
        data["matrix"]["path"] = _absolute(data["matrix"]["path"], base)
    else:
        for cell in data["matrix"]["cells"]:
            serving = cell["serving"]
            serving["model"] = _absolute(serving["model"], base)
            if serving["speculative"]:
                serving["speculative"]["model"] = _absolute(serving["speculative"]["model"], base)
    return Campaign.model_validate(data)


def specdec_revision() -> str:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(  # noqa: S603 - fixed argv
            ["git", "-C", str(here), "describe", "--always", "--dirty", "--abbrev=40"], capture_output=True, text=True, timeout=5, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        from importlib.metadata import version

        return f"specdec=={version('specdec')}"


def new_run_id(family: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{family}-{stamp}-{secrets.token_hex(3)}"


async def submit(cli: Cli, path: Path) -> str:
    """Store the campaign in a new bundle before anything runs, then publish it."""
    campaign, raw_bytes = load_campaign(path)
    # Before absolutize(): it re-validates from a full dump, after which every
    # field would look operator-set and every inert field would be warned on.
    inert = inert_fields_set(campaign)
    campaign = absolutize(campaign, Path.cwd())
    revisions = campaign.source_revisions.model_copy(update={"specdec": specdec_revision()})
    campaign = campaign.model_copy(update={"source_revisions": revisions})
    run_id = new_run_id(campaign.family)
    log = structlog.get_logger().bind(service=PRODUCER, run_id=run_id)
    bundle = cli.bundle
    bundle.create_run(run_id)
    bundle.write_bytes(run_id, layout.CAMPAIGN_YAML, raw_bytes)
    ref = bundle.write_json(run_id, layout.CAMPAIGN, campaign)
    bundle.write_json(run_id, layout.OPERATOR_COMMANDS, campaign.commands)
    bundle.write_json(run_id, layout.OPERATOR_REVISIONS, revisions)
    if inert:
        bundle.write_json(run_id, layout.INERT, inert)
        for entry, reason in inert.items():
            log.warning("accepted but inert campaign field", field=entry, reason=reason)
    bundle.rebuild_manifest(run_id)
    event = CampaignSubmitted(run_id=run_id, producer=f"{PRODUCER}/{operator()}", campaign=campaign, campaign_ref=ref)
    await cli.bus.publish(event)
    return run_id
