"""The rendered HTML report opens in headless Chromium without console errors.

Chromium comes from infra/bin/ensure-chromium (Debian's `chromium`, installed
when missing and root). If it cannot be had, the test fails with the script's
message: a report check that silently skips proves nothing.

Console errors are read from Chromium's own log (--enable-logging=stderr):
every console message (console.error, an uncaught exception, a resource the
page's Content-Security-Policy blocked) is logged as a line with `CONSOLE`.
A control page with known errors shows the detector finds them.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from services.publisher.pipeline import render_run
from services.runtime.bundle.bundle import BundleStore
from tests.unit.publisher.synthetic import RUN, Spec, build

ROOT = Path(__file__).resolve().parents[2]
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--enable-logging=stderr", "--v=0",
)
CONSOLE_RE = re.compile(r"CONSOLE|Uncaught")


@pytest.fixture(scope="session")
def chromium() -> str:
    proc = subprocess.run([str(ROOT / "infra/bin/ensure-chromium")], capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        pytest.fail(f"infra/bin/ensure-chromium could not provide Chromium (exit {proc.returncode}): "
                    f"{proc.stderr.strip()}")
    return proc.stdout.strip().splitlines()[-1]


def open_page(chromium: str, page: Path, profile: Path) -> tuple[str, list[str]]:
    """The page's DOM after load, and every console line Chromium logged for it."""
    proc = subprocess.run(
        [chromium, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}"
    return proc.stdout, [line for line in proc.stderr.splitlines() if CONSOLE_RE.search(line)]


def test_the_detector_sees_console_errors(chromium, tmp_path):
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="img-src data:">'
        '<title>bad</title></head><body><img src="http://127.0.0.1:9/x.png">'
        '<script>console.error("control error"); undefinedFunction();</script></body></html>'
    )
    _, console = open_page(chromium, page, tmp_path / "profile")
    text = "\n".join(console)
    assert "control error" in text and "Uncaught" in text and "Content Security Policy" in text


def test_the_report_opens_without_console_errors(chromium, tmp_path):
    bundle = BundleStore(tmp_path / "bundles", fsync=False)
    build(bundle, Spec(skip_events=("profile.completed",)))  # a DRAFT: its marking renders too
    out = render_run(bundle, RUN)
    page = bundle.resolve(out.html.uri)
    dom, console = open_page(chromium, page, tmp_path / "profile")
    assert console == [], "console errors:\n" + "\n".join(console)
    assert f"<title>DRAFT - specdec report: run {RUN}</title>" in dom
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', dom)) == len(out.report.plots) > 0
    assert 'id="next-lever"' in dom
