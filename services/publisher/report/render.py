"""The report's content: `CampaignData` -> `Document` -> Markdown, HTML and plots.

`build_document` puts the sections in the report's order (docs/publisher.md#the-report); its own ones are
built in sections.py, the others in the modules it names. Every table of measured numbers starts with a
pointer to its arm's identity row; rejected trials are in no arm, so in no figure and no plot."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from contracts import layout
from services.publisher.prediction import offline_section, render_predict
from services.publisher.prediction.schedule_section import with_schedule
from services.publisher.publish.review_record import review_section
from services.publisher.report import answer, canonical_section, target_model
from services.publisher.report.document import Document, to_html, to_markdown
from services.publisher.report.draft import draft_reasons
from services.publisher.report.levers import Lever, levers
from services.publisher.report.model import CampaignData
from services.publisher.report.plots import Plot, render_plots
from services.publisher.report.sections import (
    acceptance_section,
    draft_section,
    engine_section,
    gate_section,
    identity_section,
    latency_section,
    levers_section,
    redaction_section,
    rejected_section,
    speedup_section,
    steps_section,
    summary_section,
    throughput_section,
)

# report.md links its plots relative to itself: report/plots/ seen from report/.
PLOTS_LINK = posixpath.relpath(layout.REPORT_PLOTS_DIR, posixpath.dirname(layout.REPORT_MARKDOWN))


@dataclass(frozen=True)
class RenderedReport:
    document: Document
    markdown: bytes
    html: bytes
    plots: list[Plot]
    levers: list[Lever]

    @property
    def draft(self) -> bool:
        return self.document.draft


def render_report(data: CampaignData) -> RenderedReport:
    plots = [*answer.answer_plots(data), *render_plots(data)]  # the answer's chart first (answer.py)
    found = levers(data)
    doc = build_document(data, plots, found)
    return RenderedReport(
        document=doc, markdown=to_markdown(doc, plots_dir=PLOTS_LINK).encode(), html=to_html(doc).encode(),
        plots=plots, levers=found,
    )


def build_document(data: CampaignData, plots: list[Plot], found: list[Lever]) -> Document:
    by_name = {p.name: p for p in plots}
    reasons = draft_reasons(data)
    sections = [
        *([draft_section(reasons)] if reasons else []),
        *answer.answer_section(data, by_name),  # the first screen: the per-level answer (answer.py)
        summary_section(data),
        *canonical_section.intent_section(data.intent),
        steps_section(data),
        review_section(data),
        identity_section(data),
        target_model.target_section(data),
        *canonical_section.canonical_section(data.canonical),
        engine_section(data),
        rejected_section(data),
        redaction_section(data),
        render_predict.training_section(data),
        gate_section(data),
        latency_section(data, by_name),
        throughput_section(data, by_name),
        acceptance_section(data, by_name),
        speedup_section(data, by_name),
        render_predict.stops_paying_section(data),
        render_predict.ngram_settings_section(data),
        render_predict.suffix_prediction_section(data),
        offline_section.offline_acceptance_section(data),  # the trainer's estimate beside the served a_j
        with_schedule(levers_section(found), data),  # ends with the k per concurrency, predicted (issue 34)
    ]
    return Document(title=f"specdec report: run {data.run_id}", draft_reasons=tuple(reasons), sections=tuple(sections))
