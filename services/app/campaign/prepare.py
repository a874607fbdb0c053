"""A campaign file read, checked and resolved for the services: the first half of a submit.

`prepare_campaign` reads the file in either shape (specdec's own, or the workflow's canonical
matrix), names every problem at once (`CampaignRejected`) and resolves the campaign: paths made
absolute from where submit runs, specdec's own revision filled in. It stores nothing; creating
the run, storing the campaign and publishing it are services/app/campaign/submit.py.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from contracts import campaign as campaign_models
from contracts.campaign import Campaign, Matrix, MatrixFile, TrafficFile, missing_inputs
from contracts.campaign.canonical import CanonicalRecord, is_canonical
from contracts.errors import Problems
from contracts.inert import inert_fields_set
from services.app.campaign.roots import FileRoots
from services.app.campaign.suffix_cells import suffix_revision
from services.runtime.errors import ConfigurationError, invalid_input, parse_error_at
from services.shared.campaign_checks import static_problems


class CampaignRejected(ConfigurationError):
    """The campaign cannot run; `problems` names every reason."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"campaign {path} cannot be submitted; nothing was published:\n{lines}")


def load_campaign(path: Path) -> tuple[Campaign, bytes]:
    """Parse and validate a campaign file, naming every problem at once."""
    campaign, raw_bytes, _ = load_campaign_file(path)
    return campaign, raw_bytes


def load_campaign_file(path: Path, roots: FileRoots | None = None) -> tuple[Campaign, bytes, CanonicalRecord | None]:
    """Parse and validate a campaign file in either shape, naming every problem at once: specdec's own, or the
    workflow's canonical matrix (services/app/campaign/canonical.py), read into specdec's campaign with the record of
    what else it said. With `roots` (the MCP server's), the file and the matrix and traffic files it names are read only
    under them (OutsideRoots otherwise, before anything is read). A parse error names the file, line and column,
    never the line's text."""
    source = roots.confine(path, "the campaign file") if roots is not None else path
    try:
        raw_bytes = source.read_bytes()
    except OSError as exc:
        raise CampaignRejected(path, [f"cannot read the file: {exc.strerror}"]) from None
    try:
        data: Any = yaml.safe_load(raw_bytes)
    except yaml.YAMLError as exc:
        raise CampaignRejected(path, [f"not valid YAML: {parse_error_at(path, exc)}"]) from None
    record: CanonicalRecord | None = None
    if is_canonical(data):
        from services.app.campaign import canonical

        try:
            data, record = canonical.translate(data, base=Path.cwd())
        except ValidationError as exc:
            raise CampaignRejected(path, canonical.validation_problems(exc)) from None
        except canonical.CanonicalProblems as exc:
            raise CampaignRejected(path, exc.problems) from None
    return _validated(path, data, raw_bytes, record, roots=roots), raw_bytes, record


def _validated(path: Path, data: Any, raw_bytes: bytes, record: CanonicalRecord | None, *,
               roots: FileRoots | None = None) -> Campaign:
    problems = [f"missing: {item}" for item in missing_inputs(data)]
    try:
        campaign = Campaign.model_validate(data)
    except ValidationError as exc:
        for error in _chosen_branches(exc.errors()):
            where = ".".join(str(p) for p in error["loc"] if not _UNION_TAG.match(str(p))) or "(campaign)"
            if error["type"] == "missing":
                continue  # already named by missing_inputs, in words
            problems += [f"invalid: {where}: {message}" for message in _messages(error)
                         if not message.startswith("campaign lacks required inputs")]
        if not problems:
            problems.append(f"invalid: {invalid_input(exc)}")
        raise CampaignRejected(path, problems) from None
    if roots is not None:  # before any of them is looked at
        if isinstance(campaign.traffic, TrafficFile):
            roots.confine(campaign.traffic.path, "traffic.path")
        if isinstance(campaign.matrix, MatrixFile):
            roots.confine(campaign.matrix.path, "matrix.path")
    problems += _missing_files(campaign)
    problems += _kubernetes_file_env(campaign)
    problems += _static_problems(campaign, record)
    if problems:
        raise CampaignRejected(path, problems)
    return campaign


def _messages(error: Any) -> list[str]:
    """A pydantic error's message, or each problem of a validator that named several (contracts.errors.Problems)."""
    found = (error.get("ctx") or {}).get("error")
    messages = found.problems if isinstance(found, Problems) else [error["msg"]]
    return [message.removeprefix("Value error, ") for message in messages]


def _kubernetes_file_env(campaign: Campaign) -> list[str]:
    """A matrix file's cells declaring `env` on Kubernetes, refused as the campaign model refuses an inline
    matrix's (Campaign._check_kubernetes_env): the model cannot see inside a file that submit reads here."""
    if campaign.capacity.scheduler != "kubernetes" or isinstance(campaign.matrix, Matrix):
        return []
    matrix = _matrix_of(campaign)
    declared = [f"matrix cell {cell.cell_id} env {cell.env}" for cell in (matrix.cells if matrix else []) if cell.env]
    if not declared:
        return []
    return [f"{'; '.join(declared)} declared in matrix.path, but capacity.scheduler is kubernetes: a Pod gets no "
            "variable from the service's environment; reference a Kubernetes Secret in commands.serve_pod_template "
            "and remove the env names"]


def _matrix_of(campaign: Campaign) -> Matrix | None:
    return campaign.matrix if isinstance(campaign.matrix, Matrix) else _matrix_file(Path(campaign.matrix.path))


def _static_problems(campaign: Campaign, record: CanonicalRecord | None = None) -> list[str]:
    """Every check the campaign needs only itself and local files for (services/shared/campaign_checks.py, which
    the bench planner makes too), refused before anything is stored. A matrix file is read here for that, from
    where submit runs; a missing one is named by _missing_files, an unreadable one here."""
    if isinstance(campaign.matrix, Matrix):
        return static_problems(campaign, campaign.matrix, canonical=record)
    matrix_path = Path(campaign.matrix.path)
    if not matrix_path.is_file():
        return []
    try:
        matrix = Matrix.model_validate(yaml.safe_load(matrix_path.read_bytes()))
    except OSError as exc:
        return [f"invalid: matrix.path {matrix_path}: cannot read it: {exc.strerror}"]
    except yaml.YAMLError as exc:
        return [f"invalid: matrix.path: not valid YAML: {parse_error_at(matrix_path, exc)}"]
    except ValidationError as exc:
        # One line a problem, as for an inline matrix (a validator's Problems expanded).
        return [f"invalid: matrix.path {matrix_path}: {'.'.join(map(str, e['loc'])) or 'matrix'}: {message}"
                for e in exc.errors() for message in _messages(e)]
    return static_problems(campaign, matrix, canonical=record, cells_at=f"{matrix_path}: cells")


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
        out = subprocess.run(  # fixed argv
            ["git", "-C", str(here), "describe", "--always", "--dirty", "--abbrev=40"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        from importlib.metadata import version

        return f"specdec=={version('specdec')}"


@dataclass(frozen=True)
class PreparedCampaign:
    """A validated campaign, resolved for the services, with what submit stores beside it."""

    campaign: Campaign
    raw_bytes: bytes
    inert: dict[str, str]
    # What a canonical matrix file said beyond the campaign (contracts/campaign/canonical.py); None for specdec's shape.
    canonical: CanonicalRecord | None = None


def prepare_campaign(path: Path, roots: FileRoots | None = None) -> PreparedCampaign:
    """Validate the campaign file (every problem named at once) and resolve it: paths made
    absolute from where this runs, specdec's own revision filled in. Stores nothing. `roots`:
    the folders the caller may read from (load_campaign_file)."""
    campaign, raw_bytes, canonical = load_campaign_file(path, roots)
    # Before absolutize(): it re-validates from a full dump, after which every
    # field would look operator-set and every inert field would be warned on.
    inert = inert_fields_set(campaign)
    campaign = absolutize(campaign, Path.cwd())
    matrix = _matrix_of(campaign)
    revisions = campaign.source_revisions.model_copy(update={
        "specdec": specdec_revision(), "suffix_decoding": suffix_revision(campaign, matrix) if matrix else None})
    campaign = campaign.model_copy(update={"source_revisions": revisions})
    return PreparedCampaign(campaign=campaign, raw_bytes=raw_bytes, inert=inert, canonical=canonical)


def canonical_run_problems(prepared: PreparedCampaign, run_id: str | None, bundle_root: Path) -> list[str]:
    """A canonical file's experiment_id and evidence_bundle_path must be the run it is submitted into."""
    record = prepared.canonical
    if record is None:
        return []
    problems = []
    if record.experiment_id is not None and run_id is not None and record.experiment_id != run_id:
        problems.append(f"experiment_id: the file names run {record.experiment_id!r}, but it is submitted into run "
                        f"{run_id!r}: submit it with --experiment-id {record.experiment_id}, or fix the file")
    if record.evidence_bundle_path is not None and run_id is not None:
        want = (bundle_root / run_id).absolute().resolve()
        given = Path(record.evidence_bundle_path).absolute().resolve()
        if given != want:
            problems.append(f"evidence_bundle_path: the file names {record.evidence_bundle_path}, but run {run_id}'s "
                            f"bundle is {want} (SPECDEC_BUNDLE_ROOT/<run-id>): fix the file or the bundle root")
    return problems
