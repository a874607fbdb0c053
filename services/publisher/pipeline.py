"""Render a run's report into its bundle, write-once under `report/` (the service and `specdec report` share this).

The same evidence renders the same bytes, so a re-render is a no-op; one from other evidence is refused
before anything is written (ReportConflict; docs/publisher.md#write-once-reports)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts import layout
from contracts.artifacts.report import ReportSummary
from contracts.envelope import ArtifactRef
from services.publisher.errors import ReportConflict
from services.publisher.prediction.offline_section import offline_figures
from services.publisher.prediction.predict import report_figures
from services.publisher.prediction.schedule_plan import schedule_figures
from services.publisher.report.aggregate import read_campaign
from services.publisher.report.render import RenderedReport, render_report
from services.runtime.bundle.bundle import ArtifactMissing, BundleStore
from services.runtime.bundle.bundle_records import canonical_json


def report_name(relpath: str) -> str:
    """A report file's name under report/ (`plots/speedup.png`), as a copy and a publication name it."""
    return relpath.removeprefix(f"{layout.REPORT_DIR}/")


@dataclass(frozen=True)
class RenderOutcome:
    report: RenderedReport
    summary: ReportSummary
    markdown: ArtifactRef
    html: ArtifactRef
    refs: list[ArtifactRef]  # every file written, plots first


def render_run(bundle: BundleStore, run_id: str, *, extra_events: Sequence[Mapping[str, Any]] = ()) -> RenderOutcome:
    """Aggregate, render and write the report into the run's bundle."""
    report, summary = _render(bundle, run_id, extra_events)
    files = report_files(report, summary)
    _refuse_conflicts(bundle, run_id, files)
    refs = [bundle.write_bytes(run_id, relpath, data) for relpath, data in files.items()]
    by_path = dict(zip(files, refs, strict=True))
    return RenderOutcome(
        report=report, summary=summary, markdown=by_path[layout.REPORT_MARKDOWN], html=by_path[layout.REPORT_HTML],
        refs=refs,
    )


def render_copy(bundle: BundleStore, run_id: str, out: Path) -> tuple[RenderedReport, ReportSummary, list[Path]]:
    """Render from the bundle into `out` (a copy outside the bundle; files there are overwritten)."""
    report, summary = _render(bundle, run_id, ())
    written = []
    for relpath, data in report_files(report, summary).items():
        path = out / report_name(relpath)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(path)
    return report, summary, written


def _render(
    bundle: BundleStore, run_id: str, extra_events: Sequence[Mapping[str, Any]]
) -> tuple[RenderedReport, ReportSummary]:
    data = read_campaign(bundle, run_id, extra_events=extra_events)
    report = render_report(data)
    summary = ReportSummary(
        run_id=run_id,
        draft=report.draft,
        draft_reasons=list(report.document.draft_reasons),
        decision=data.decision.decision if data.decision else None,
        decision_sha256=data.decision_sha256,
        plots=[p.name for p in report.plots],
        levers=[lever.rule for lever in report.levers],
        **report_figures(data),
        offline_acceptance=offline_figures(data),
        schedules=schedule_figures(data),
    )
    return report, summary


def report_files(report: RenderedReport, summary: ReportSummary) -> dict[str, bytes]:
    """Every file of the report by its bundle path, in write order (the Markdown last: its presence
    means the rest is there)."""
    files = {layout.report_plot(p.name): p.png for p in report.plots}
    files[layout.REPORT_SUMMARY] = canonical_json(summary)
    files[layout.REPORT_HTML] = report.html
    files[layout.REPORT_MARKDOWN] = report.markdown
    return files


def _refuse_conflicts(bundle: BundleStore, run_id: str, files: dict[str, bytes]) -> None:
    differing = []
    for relpath, data in files.items():
        try:
            ref = bundle.ref(run_id, relpath)
        except ArtifactMissing:
            continue
        if ref.sha256 != hashlib.sha256(data).hexdigest():
            differing.append(report_name(relpath))
    if differing:
        raise ReportConflict(
            f"run {run_id} already holds a different report ({', '.join(differing[:3])}"
            f"{', ...' if len(differing) > 3 else ''} differ): it was rendered from other evidence and reports are "
            f"write-once; render a copy outside the bundle with `specdec report {run_id} --out DIR`, or start a new run"
        )
