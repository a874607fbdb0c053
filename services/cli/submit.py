"""`specdec submit CAMPAIGN.yaml`: validate, create the run and its bundle, publish."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import structlog
import yaml
from pydantic import BaseModel, ValidationError

from contracts import campaign as campaign_models
from contracts import layout
from contracts.campaign import Campaign, Matrix, MatrixFile, TrafficFile, missing_inputs
from contracts.events import CampaignSubmitted
from contracts.inert import inert_fields_set
from contracts.templates import template_problems
from services.bench.plan import source_problems
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
        for error in _chosen_branches(exc.errors()):
            where = ".".join(str(p) for p in error["loc"] if not _UNION_TAG.match(str(p))) or "(campaign)"
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
    problems += _source_problems(campaign)
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


# A union member's tag in a pydantic error location (`matrix.MatrixFile.cells`), not a field: a
# validator-wrapped or literal member, or a model of the campaign by name (not any capitalised dict key).
_MODELS = "|".join(name for name, value in vars(campaign_models).items()
                   if isinstance(value, type) and issubclass(value, BaseModel))
_UNION_TAG = re.compile(rf"^(function-(after|before|wrap|plain)\[.*\]|literal\[.*\]|{_MODELS})$")
_WRONG_FORM = {"extra_forbidden", "missing", "model_type", "literal_error"}


def _chosen_branches(errors: list[Any]) -> list[Any]:
    """Where a union (`matrix`: inline cells or a path) failed in every form, only the
    errors of the form the campaign was written in: the one with the fewest signs of being
    the wrong form (keys it does not have, keys it lacks). The others only say it is not that form."""
    branches: dict[tuple[Any, ...], dict[str, list[Any]]] = {}
    plain = []
    for error in errors:
        loc = error["loc"]
        at = next((i for i, p in enumerate(loc) if isinstance(p, str) and _UNION_TAG.match(p)), None)
        if at is None:
            plain.append(error)
        else:
            branches.setdefault(tuple(loc[:at]), {}).setdefault(loc[at], []).append(error)
    for forms in branches.values():
        best = min(sum(e["type"] in _WRONG_FORM for e in errs) for errs in forms.values())
        plain += [e for errs in forms.values() if sum(e["type"] in _WRONG_FORM for e in errs) == best for e in errs]
    return plain


def _source_problems(campaign: Campaign) -> list[str]:
    """Cell labels the prompt source contradicts and shapes no prompt would reach
    (services/bench/plan.source_problems), refused before anything is stored; a
    matrix file is read for it, as for the templates."""
    if isinstance(campaign.matrix, Matrix):
        return [f"invalid: {p}" for p in source_problems(campaign, campaign.matrix)]
    matrix = _matrix_file(Path(campaign.matrix.path))
    if matrix is None:
        return []  # named by _missing_files or _template_problems
    return [f"invalid: {p}" for p in source_problems(campaign, matrix, cells_at=f"{campaign.matrix.path}: cells")]


def _matrix_file(path: Path) -> Matrix | None:
    try:
        return Matrix.model_validate(yaml.safe_load(path.read_bytes()))
    except (OSError, yaml.YAMLError, ValidationError):
        return None


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
        # Read once, here, and stored inline: its paths resolve like inline cells' (from where submit
        # runs), and a later edit of the file cannot change what this run measures.
        path = Path(_absolute(data["matrix"]["path"], base) or "")
        matrix = _matrix_file(path)
        if matrix is None:
            raise CampaignRejected(path, ["matrix.path: the matrix file changed or went away while it was submitted"])
        data["matrix"] = matrix.model_dump(by_alias=True)
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
    build_record = target_build_record(Path(campaign.target.checkpoint))
    if build_record is not None:
        bundle.write_json(run_id, layout.TARGET_BUILD, build_record)
    if inert:
        bundle.write_json(run_id, layout.INERT, inert)
        for entry, reason in inert.items():
            log.warning("accepted but inert campaign field", field=entry, reason=reason)
    bundle.rebuild_manifest(run_id)
    event = CampaignSubmitted(run_id=run_id, producer=f"{PRODUCER}/{operator()}", campaign=campaign, campaign_ref=ref)
    await cli.bus.publish(event)
    return run_id
