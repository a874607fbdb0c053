"""The report's section "Trained draft: offline vs served acceptance".

Per trained candidate and level: the trainer's offline per-position estimate beside the served a_j (the
same quantity on both sides), with the error; report.json carries the same rows as numbers. The gate never
reads the estimate: training metrics cannot authorise promotion
(docs/publisher.md#trained-draft-offline-vs-served-acceptance)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from contracts import layout
from contracts.artifacts.offline_acceptance import OFFLINE_ACCEPTANCE_FILE
from contracts.artifacts.report import OfflineAcceptanceFigure
from contracts.campaign import SpeculativeConfig
from services.publisher.prediction.predict import cell_speculation
from services.publisher.report import figures as fig
from services.publisher.report.document import Block, Paragraph, Section, Table
from services.publisher.report.model import ArmLevel, CampaignData
from services.publisher.report.pointers import id_cols
from services.shared.formatting import MISSING

TITLE = "Trained draft: offline vs served acceptance"
ANCHOR = "offline-acceptance"
FILE = f"{layout.TRAINING_OUTPUT_DIR}/{OFFLINE_ACCEPTANCE_FILE}"


def trained_cells(data: CampaignData) -> list[str]:
    """Cells serving the draft this run trained: declared '{training.output}', or resolved to its folder."""
    return [cell for cell, spec in cell_speculation(data).items() if spec is not None and _trained(spec, data)]


def _trained(spec: SpeculativeConfig, data: CampaignData) -> bool:
    if spec.needs_training:
        return True
    # The bench plan and the trials' identity carry the resolved path, not the placeholder.
    folder = data.training_output_dir
    return bool(spec.model and folder and posixpath.normpath(spec.model) == posixpath.normpath(folder))


@dataclass(frozen=True)
class Comparison:
    """One trained arm's served a_j beside the offline estimate; served is None without drafts."""

    arm: ArmLevel
    offline: list[float]
    served: fig.Acceptance | None

    @property
    def offline_length(self) -> float:
        return 1 + sum(self.offline)

    @property
    def errors(self) -> list[float]:
        """served - offline over the positions both have."""
        if self.served is None:
            return []
        return [self.served.per_position[j] - self.offline[j] for j in range(min(len(self.offline), self.served.k))]

    @property
    def length_error(self) -> float | None:
        # Lengths over different k count different positions: no error is given for them.
        if self.served is None or self.served.k != len(self.offline):
            return None
        return self.served.mean_length - self.offline_length

    @property
    def note(self) -> str:
        if self.served is None:
            return "no drafts served at this level"
        if self.length_error is None:
            return f"lengths not compared: k differs ({len(self.offline)} offline, {self.served.k} served)"
        return ""


def comparisons(data: CampaignData) -> list[Comparison]:
    """Every trained arm beside the estimate, in arm order; empty without a trained cell or a usable estimate."""
    cells = trained_cells(data)
    offline = data.offline_acceptance.a() if data.offline_acceptance is not None else None
    if not cells or offline is None:
        return []
    return [Comparison(arm, offline, fig.acceptance(arm)) for arm in data.arms if arm.cell_id in cells]


def offline_figures(data: CampaignData) -> list[OfflineAcceptanceFigure]:
    """The `offline_acceptance` of report.json: the section's rows as numbers."""
    return [OfflineAcceptanceFigure(
        cell_id=c.arm.cell_id, concurrency=c.arm.concurrency, offline_per_position=c.offline,
        served_per_position=list(c.served.per_position) if c.served else None, error_per_position=c.errors,
        offline_acceptance_length=c.offline_length, served_acceptance_length=c.served.mean_length if c.served else None,
        acceptance_length_error=c.length_error, note=c.note,
    ) for c in comparisons(data)]


def offline_acceptance_section(data: CampaignData) -> Section:
    if not trained_cells(data):
        return _one_line("The campaign has no trained draft candidate (no cell serves '{training.output}').")
    found = data.offline_acceptance
    if found is None:
        return _one_line(f"No offline estimate: {data.offline_acceptance_note or 'no ' + FILE}.")
    if found.a() is None:
        return _one_line(f"No offline estimate: {FILE} counts no drafts.")
    rows = tuple(_row(c) for c in comparisons(data))
    blocks: list[Block] = [
        Paragraph((f"Before serving, the trainer estimated the draft's acceptance ({FILE}; method {found.method}, "
                   f"k = {found.num_speculative_tokens}; {found.drafts} drafts over {found.answers} of "
                   f"{found.heldout_prompts} held-out prompts, answers up to {found.max_new_tokens} tokens): "
                   "teacher-forced against the target's greedy tokens, position j accepted where drafts 1..j all "
                   "match. Offline a_j = accepted at j / drafts (the trainer's p_j, from its counts); served a_j "
                   "as in \"Acceptance per position\" (counters pooled over the level's trials); length = 1 + sum "
                   "of a_j; error = served - offline. The estimate is advice: the gate never reads it (training "
                   "metrics cannot authorise promotion).",)),
        Table(("ID", "cell", "concurrency", "trials", "named baseline", "k (offline/served)",
               "offline a_1 / ... / a_k", "served a_1 / ... / a_k", "error a_1 / ... / a_k", "offline length",
               "served length", "length error"), rows),
    ]
    return Section(ANCHOR, TITLE, tuple(blocks))


def _row(c: Comparison) -> tuple:
    arm, offline, served = c.arm, c.offline, c.served
    ids = id_cols(arm)
    if served is None:
        return (*ids, f"{len(offline)}/{MISSING}", _seq(offline), "no drafts", MISSING, f"{c.offline_length:.3f}",
                MISSING, MISSING)
    errors = c.errors
    errors_text = " / ".join([f"{e:+.3f}" for e in errors] + [MISSING] * (max(len(offline), served.k) - len(errors)))
    length_error = (f"{c.length_error:+.3f}" if c.length_error is not None
                    else f"not compared: k differs ({len(offline)} offline, {served.k} served)")
    return (*ids, f"{len(offline)}/{served.k}", _seq(offline), _seq(served.per_position), errors_text,
            f"{c.offline_length:.3f}", f"{served.mean_length:.3f}", length_error)


def _one_line(text: str) -> Section:
    return Section(ANCHOR, TITLE, (Paragraph((text,)),))


def _seq(values) -> str:
    return " / ".join(f"{v:.3f}" for v in values)

