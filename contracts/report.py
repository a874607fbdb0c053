"""report/report.json, version 1: what a rendered report says about itself.

The publisher writes it when it renders a run's report and reads it back to
publish that report (which files, DRAFT or not); a reviewer's tooling can read
the DRAFT flag and its reasons without parsing the Markdown. No I/O here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts.envelope import RunId, Sha256, Strict

SUMMARY_VERSION = 1


class ReportSummary(Strict):
    """report/report.json: what the rendered report says about itself."""

    version: Literal[1] = Field(default=SUMMARY_VERSION, description="Version of this summary.")
    run_id: RunId = Field(description="The run.")
    draft: bool = Field(description="True when the report is marked DRAFT.")
    draft_reasons: list[str] = Field(description="Every reason for the DRAFT marking; empty for a final report.")
    decision: str | None = Field(description="The gate's decision the report shows; None without one.")
    decision_sha256: Sha256 | None = Field(description="sha256 of the DECISION.json the report was rendered from.")
    plots: list[str] = Field(description="Plot files under report/plots/, in report order.")
    levers: list[str] = Field(description="Rules of the levers in the last section, the next one first.")
