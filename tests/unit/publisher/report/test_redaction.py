"""The report's redaction section: per kind, what the corpus step replaced (from the corpus manifest)."""

from __future__ import annotations

from collections.abc import Callable

from contracts.artifacts.corpus import Redaction
from services.publisher.report.document import Document, to_markdown
from services.publisher.report.levers import levers
from services.publisher.report.model import CampaignData
from services.publisher.report.render import build_document


def _section(data: CampaignData) -> str:
    doc = build_document(data, [], levers(data))
    [section] = [s for s in doc.sections if s.id == "redaction"]
    return to_markdown(Document(title=doc.title, draft_reasons=(), sections=(section,)), plots_dir="plots")


def test_counts_per_kind_with_their_placeholders_and_the_rule_set(campaign_data: Callable[..., CampaignData]) -> None:
    red = Redaction(
        counts={"aws_secret_key": 3, "phone": 5, "iban": 0}, records_redacted=6,
        diagnostics_counts={"phone": 2, "iban": 1}, ruleset="detectors-1 (detect-secrets 1.5.0)",
        placeholders={"aws_secret_key": "<SECRET:aws_secret_key>", "phone": "<PII:phone>", "iban": "<PII:iban>"},
    )
    text = _section(campaign_data().model_copy(update={"redaction": red}))
    assert "6 corpus record(s)" in text and "detectors-1 (detect-secrets 1.5.0)" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "placeholder" not in line]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows if not set(row) <= set("|-: ")]
    # Most found first; a kind found only in diagnostics is listed; a kind never found is not.
    assert cells == [["phone", "<PII:phone>", "5", "2"], ["aws_secret_key", "<SECRET:aws_secret_key>", "3", "0"],
                     ["iban", "<PII:iban>", "0", "1"]]


def test_a_run_without_a_corpus_says_so(campaign_data: Callable[..., CampaignData]) -> None:
    text = _section(campaign_data().model_copy(update={"redaction": None}))
    assert "No corpus in this bundle" in text
