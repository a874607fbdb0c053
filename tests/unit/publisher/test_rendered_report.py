"""The rendered report: plots, identity on every number, self-contained HTML, write-once rendering."""

from __future__ import annotations

import base64
import io
import math
import re

import numpy as np
import orjson
import pytest
from PIL import Image

from services.publisher.errors import ReportConflict
from services.publisher.pipeline import render_run
from services.runtime.bundle.bundle import BundleStore
from tests.unit.publisher.synthetic import CANDIDATE, LEVELS, RUN, STANDING, Spec, build

PNG_RE = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"')
IDENTITY_FIELDS = ("model", "hardware", "node", "quantization", "parallelism", "serving config", "workload shape",
                   "concurrency", "regime", "source revision", "trials (found/declared)", "named baseline")


def tables(markdown: str) -> list[list[list[str]]]:
    """Every Markdown table as rows of cells (header first)."""
    found, current = [], []
    for line in markdown.splitlines():
        if line.startswith("|"):
            if not line.startswith("|---"):
                current.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
        elif current:
            found.append(current)
            current = []
    return found + ([current] if current else [])


def test_every_embedded_png_decodes_and_is_not_uniform(clean):
    _, out = clean
    pngs = [base64.b64decode(m) for m in PNG_RE.findall(out.report.html.decode())]
    assert len(pngs) == len(out.report.plots) > 0
    for data in pngs:
        image = Image.open(io.BytesIO(data))
        image.load()
        assert image.format == "PNG"
        pixels = np.asarray(image.convert("L"), dtype=float)
        assert pixels.var() > 50, "a plot with (almost) one colour drew nothing"
        assert np.mean(pixels < 200) > 0.01, "fewer than 1 % of pixels are ink"


def test_plot_count_is_cells_times_levels_plus_campaign_plots(clean):
    bundle, out = clean
    html = out.report.html.decode()
    cells, speculative = (STANDING, CANDIDATE), (CANDIDATE,)
    # the answer per level, latency per cell x level, acceptance per speculative cell, one throughput, one speedup
    # (plots.py)
    expected = 1 + len(cells) * len(LEVELS) + len(speculative) + 1 + 1
    assert len(PNG_RE.findall(html)) == expected
    names = {p.name for p in out.report.plots}
    assert {f"latency-{c}-c{level}.png" for c in cells for level in LEVELS} <= names
    assert {"answer.png", "acceptance-ngram-k3.png", "throughput.png", "speedup.png"} <= names
    on_disk = sorted((bundle.run_dir(RUN) / "report/plots").glob("*.png"))
    assert len(on_disk) == expected
    embedded = sorted(base64.b64decode(m) for m in PNG_RE.findall(html))
    assert embedded == sorted(p.read_bytes() for p in on_disk)


def test_markdown_images_are_the_plot_files(clean):
    bundle, out = clean
    linked = re.findall(r"!\[[^\]]*\]\((plots/[^)]+)\)", out.report.markdown.decode())
    assert sorted(linked) == sorted(f"plots/{p.name}" for p in out.report.plots)
    for path in linked:
        assert (bundle.run_dir(RUN) / "report" / path).is_file()


def test_every_number_row_points_to_a_complete_identity(clean):
    _, out = clean
    md = out.report.markdown.decode()
    all_tables = tables(md)
    identity = next(t for t in all_tables if t[0][:2] == ["ID", "cell"] and "model" in t[0])
    header = identity[0]
    anchors = {}
    for row in identity[1:]:
        key = re.fullmatch(r'<a id="id-([^"]+)"></a>(\S+)', row[0]).group(1)
        anchors[key] = dict(zip(header, row, strict=True))
    assert set(anchors) == {f"{c}@c{level}" for c in (STANDING, CANDIDATE) for level in LEVELS}
    for fields in anchors.values():
        for name in IDENTITY_FIELDS:
            assert fields[name] not in ("", "unknown"), (name, fields)
        assert fields["identity check"] == "complete"
    measured = [t for t in all_tables if t[0][0] == "ID" and t is not identity]
    assert len(measured) >= 7  # candidates, gate verdicts, floors, latency, throughput, acceptance, speedup
    for table in measured:
        for row in table[1:]:
            links = re.findall(r"\[([^\]]+)\]\(#id-([^)]+)\)", row[0])
            assert links and re.fullmatch(r"(\[[^\]]+\]\(#[^)]+\)(, )?)+", row[0]), row
            assert all(text == key and key in anchors for text, key in links), row
    # HTML: every identity pointer resolves to an element of the page.
    html = out.report.html.decode()
    ids = set(re.findall(r' id="([^"]+)"', html))
    hrefs = set(re.findall(r'href="#([^"]+)"', html))
    assert hrefs and hrefs <= ids


def test_table_figures_are_computed_from_the_result_files(clean):
    bundle, out = clean
    latency = next(t for t in tables(out.report.markdown.decode()) if "TPOT ms" in t[0])
    col = latency[0].index("TPOT ms")
    row = next(r for r in latency[1:] if r[0].startswith(f"[{CANDIDATE}@c4]"))
    medians = [orjson.loads(bundle.read_bytes(RUN, f"bench/{CANDIDATE}/trial-{t}/result-c4.json"))["median_tpot_ms"]
               for t in range(3)]
    geo = math.exp(sum(math.log(v) for v in medians) / 3)
    mean, low, high = (float(v) for v in re.findall(r"[0-9.]+", row[col]))
    assert mean == pytest.approx(geo, rel=5e-3)
    assert (low, high) == (pytest.approx(min(medians), rel=5e-3), pytest.approx(max(medians), rel=5e-3))


def test_html_is_one_self_contained_file_without_scripts(clean):
    _, out = clean
    html = out.report.html.decode()
    assert "<script" not in html.lower()
    assert "Content-Security-Policy" in html
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources and all(s.startswith(("data:image/png;base64,", "#")) for s in sources)
    assert "http://" not in html and "https://" not in html


def test_clean_report_is_final_and_ends_with_the_next_lever(clean):
    _, out = clean
    md, html = out.report.markdown.decode(), out.report.html.decode()
    assert not out.summary.draft and "DRAFT" not in md and "DRAFT" not in html
    headings = re.findall(r"^## (.+)$", md, flags=re.M)
    assert headings[-1] == "Next measured lever"
    assert html.rindex("<section id=") == html.index('<section id="next-lever">')
    assert md.index("## Summary") < md.index("## Gate verdicts") < md.index("## Next measured lever")


def test_rerender_of_the_same_evidence_is_a_no_op(clean):
    bundle, first = clean
    again = render_run(bundle, RUN)
    assert [r.sha256 for r in again.refs] == [r.sha256 for r in first.refs]
    assert again.report.html == first.report.html


def test_a_report_from_other_evidence_is_refused_before_anything_is_written(tmp_path):
    bundle = BundleStore(tmp_path / "bundles", fsync=False)
    build(bundle, Spec())
    # A report rendered earlier from other evidence already stands in the bundle.
    bundle.write_bytes(RUN, "report/report.md", b"# an older report\n")
    with pytest.raises(ReportConflict, match="--out DIR"):
        render_run(bundle, RUN)
    assert not (bundle.run_dir(RUN) / "report/plots").exists()
    assert not (bundle.run_dir(RUN) / "report/report.html").exists()


def test_the_report_shows_each_guard_and_the_node(tmp_path):
    bundle = BundleStore(tmp_path / "bundles", fsync=False)
    build(bundle, Spec(guards=("output_throughput", "ttft:p99")))
    md = render_run(bundle, RUN).report.markdown.decode()
    assert "objective tpot:median (lower is better); guards output_throughput, ttft:p99; named baseline" in md
    guards = next(t for t in tables(md) if "guard" in t[0])
    rows = [dict(zip(guards[0], row, strict=True)) for row in guards[1:]]
    assert {(r["guard"], r["concurrency"], r["result"]) for r in rows} == {
        (g, str(level), "passed") for g in ("output_throughput", "ttft:p99") for level in LEVELS}
    identity = next(t for t in tables(md) if t[0][:2] == ["ID", "cell"] and "model" in t[0])
    assert {dict(zip(identity[0], row, strict=True))["node"] for row in identity[1:]} == {"node-1"}


def test_a_plot_subtitle_spells_an_unlimited_level_as_the_report_does(campaign_data):
    from services.publisher.report.plots import identity_line

    arm = next(a for a in campaign_data().arms if a.identity is not None)
    unlimited = arm.model_copy(update={"concurrency": None,
                                       "identity": arm.identity.model_copy(update={"concurrency": None})})
    assert f"| c={arm.concurrency} |" in identity_line(arm)
    assert "| c=unlimited |" in identity_line(unlimited)
