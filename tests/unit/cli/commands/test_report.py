"""`specdec report` and `specdec publish`, offline against a bundle under SPECDEC_BUNDLE_ROOT."""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import pytest

from services.cli.commands import report
from services.runtime.bundle.bundle import BundleStore
from tests.unit.publisher.synthetic import RUN, Spec, build


def specdec(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="specdec")
    report.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPECDEC_BUNDLE_ROOT", str(tmp_path / "bundles"))
    return tmp_path / "bundles"


def test_report_then_publish_dry_then_live(root, capsys, tmp_path):
    bundle = BundleStore(root, fsync=False)
    build(bundle, Spec(acknowledged=True))  # the campaign's acknowledgement does not make the CLI live
    assert specdec("report", RUN) == 0
    out = capsys.readouterr()
    printed = [Path(line) for line in out.out.splitlines()]
    assert bundle.run_dir(RUN) / "report/report.html" in printed and all(p.is_file() for p in printed)
    assert "final" in out.err and "next lever" in out.err

    assert specdec("publish", RUN) == 0
    out = capsys.readouterr().out
    assert out.startswith("DRY RUN: would send") and str(bundle.run_dir(RUN) / "published") in out
    html_sha = hashlib.sha256((bundle.run_dir(RUN) / "report/report.html").read_bytes()).hexdigest()
    assert f"{html_sha}" in out
    assert not (bundle.run_dir(RUN) / "published").exists() and not (bundle.run_dir(RUN) / "publish").exists()

    site = tmp_path / "site"
    assert specdec("publish", RUN, "--target", f"file://{site}", "--i-understand-this-publishes-externally",
                   "--dry-run") == 0
    assert capsys.readouterr().out.startswith("DRY RUN") and not site.exists()

    assert specdec("publish", RUN, "--target", f"file://{site}", "--i-understand-this-publishes-externally") == 0
    out = capsys.readouterr().out
    assert out.startswith("sent ") and "live: i_understand_this_publishes_externally given by the cli" in out
    assert hashlib.sha256((site / RUN / "report.html").read_bytes()).hexdigest() == html_sha
    assert len(list((bundle.run_dir(RUN) / "publish").glob("cli-*/publication.json"))) == 1


def test_report_out_writes_a_copy_and_leaves_the_bundle_alone(root, capsys, tmp_path):
    bundle = BundleStore(root, fsync=False)
    build(bundle, Spec(skip_events=("corpus.completed",)))
    assert specdec("report", RUN, "--out", str(tmp_path / "copy")) == 0
    out = capsys.readouterr()
    assert (tmp_path / "copy/report.html").is_file() and (tmp_path / "copy/plots/speedup.png").is_file()
    assert not (bundle.run_dir(RUN) / "report").exists()
    assert "DRAFT (1 reason(s))" in out.err and "step corpus is missing" in out.err
    assert (tmp_path / "copy/report.md").read_text().startswith("# DRAFT - ")
