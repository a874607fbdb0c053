"""Campaign-level rules and the trainer's inputs (pure).

- Whether a campaign trains at all: a shapes-only campaign has no traffic to
  learn from, and a matrix with no cell using `{training.output}` needs no
  draft (docs/design.md#campaigns-without-traffic); both record training as skipped, with the reason.
- The corpus splits: `{corpus_train}` holds exactly the `split == "train"`
  records of CORPUS.jsonl, byte for byte; `{corpus_heldout}` the heldout ones.
  A line that is not a corpus record with a valid split is counted, not fatal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from contracts.campaign import Campaign, Cell, Matrix
from services.runtime.errors import invalid_input, parse_error_at
from services.trainer_proxy.errors import PlanError

SPLITS = ("train", "heldout")


def load_cells(campaign: Campaign, cwd: Path) -> list[Cell]:
    """The matrix cells, inline or from matrix.path (relative to the service's working directory)."""
    if isinstance(campaign.matrix, Matrix):
        return list(campaign.matrix.cells)
    path = Path(campaign.matrix.path)
    path = path if path.is_absolute() else cwd / path
    try:
        matrix = Matrix.model_validate(yaml.safe_load(path.read_text()))
    except OSError as exc:
        raise PlanError(f"cannot read matrix.path {path}: {exc}; the trainer-proxy reads it to know whether a draft "
                        "is needed") from None
    except yaml.YAMLError as exc:
        raise PlanError(f"matrix.path is not valid YAML: {parse_error_at(path, exc)}") from None
    except ValidationError as exc:
        raise PlanError(f"matrix.path {path} is not a valid matrix: {invalid_input(exc)}") from None
    return list(matrix.cells)


def skip_reason(campaign: Campaign, cells: list[Cell]) -> str | None:
    """Why this campaign trains nothing; None when it needs a trained draft."""
    if campaign.shapes_only:
        return (
            "shapes-only campaign: named workload shapes give prompts but no traffic to train a draft on; "
            "its candidates need no training (ngram, suffix) or name an existing draft checkpoint"
        )
    users = [cell.cell_id for cell in cells
             if cell.serving.speculative is not None and cell.serving.speculative.needs_training]
    if not users:
        return "no cell of the matrix uses '{training.output}': no candidate needs a trained draft"
    return None


@dataclass(frozen=True)
class CorpusSplit:
    """CORPUS.jsonl cut by split; the lines are the corpus's own bytes."""

    train: bytes
    heldout: bytes
    train_records: int
    heldout_records: int
    rejected_lines: int


def split_corpus(data: bytes) -> CorpusSplit:
    parts: dict[str, list[bytes]] = {split: [] for split in SPLITS}
    rejected = 0
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            rejected += 1
            continue
        split = record.get("split") if isinstance(record, dict) else None
        if split not in parts:
            rejected += 1
            continue
        parts[split].append(raw.rstrip(b"\r") + b"\n")
    return CorpusSplit(
        train=b"".join(parts["train"]),
        heldout=b"".join(parts["heldout"]),
        train_records=len(parts["train"]),
        heldout_records=len(parts["heldout"]),
        rejected_lines=rejected,
    )


def prompt_messages(data: bytes, limit: int) -> list[list[dict[str, str]]]:
    """The chat messages of the first `limit` records of a split file."""
    prompts: list[list[dict[str, str]]] = []
    for raw in data.split(b"\n"):
        if len(prompts) >= limit:
            break
        try:
            record = json.loads(raw) if raw.strip() else None
        except ValueError:
            continue
        messages = record.get("messages") if isinstance(record, dict) else None
        if isinstance(messages, list) and messages:
            prompts.append([
                {"role": str(m.get("role", "user")), "content": str(m.get("content", ""))}
                for m in messages if isinstance(m, dict)
            ])
    return prompts
