"""The failpoint registry and its setting: parsing, firing once at the armed pass, and every
registered point marked in the code (the campaign suite crashes each: tests/e2e/test_failpoints.py)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from services.runtime import failpoints
from services.runtime.failpoints import FailpointError, check_setting, parse

ROOT = Path(__file__).resolve().parents[3]
HIT_RE = re.compile(r"""failpoints\.hit\(\s*["']([^"']+)["']""")


def test_parse_reads_names_and_passes() -> None:
    assert parse("") == {}
    assert parse(" bundle.file-before-record = kill ") == {"bundle.file-before-record": 1}
    assert parse("bundle.file-before-record=kill@3,") == {"bundle.file-before-record": 3}


@pytest.mark.parametrize(("value", "words"), [
    ("bundle.file-befor-record=kill", "unknown failpoint 'bundle.file-befor-record'"),
    ("bundle.file-before-record", "has no action"),
    ("bundle.file-before-record=sleep", "action 'sleep'"),
    ("bundle.file-before-record=kill@0", "action 'kill@0'"),
    ("bundle.file-before-record=kill@x", "action 'kill@x'"),
    ("bundle.file-before-record=kill,bundle.file-before-record=kill@2", "twice"),
])
def test_a_wrong_setting_is_refused_with_one_line(value: str, words: str) -> None:
    with pytest.raises(FailpointError) as refused:
        check_setting({failpoints.ENV: value})
    assert words in str(refused.value) and "\n" not in str(refused.value)


def _passes(setting: str, passes: int) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\nfrom services.runtime import failpoints\n"
        f"for n in range({passes}):\n"
        "    print(n, flush=True)\n"
        "    failpoints.hit('bundle.file-before-record')\n"
        "print('survived', flush=True)\n"
    )
    return subprocess.run([sys.executable, "-c", code], env={failpoints.ENV: setting, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_an_armed_point_kills_the_process_at_its_pass_once() -> None:
    third = _passes("bundle.file-before-record=kill@3", 5)
    assert third.returncode == -signal.SIGKILL
    assert third.stdout.split() == ["0", "1", "2"]
    assert "failpoint bundle.file-before-record fired on pass 3: SIGKILL" in third.stderr
    unarmed = _passes("", 5)
    assert unarmed.returncode == 0 and unarmed.stdout.split()[-1] == "survived"


def test_a_service_refuses_a_misspelt_failpoint_at_start() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "services.runtime.main", "journal"],
        env={failpoints.ENV: "bundle.file-befor-record=kill", "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "unknown failpoint 'bundle.file-befor-record'" in proc.stderr


def test_every_registered_failpoint_is_marked_in_the_code_and_every_mark_is_registered() -> None:
    marked: dict[str, list[str]] = {}
    for path in sorted((ROOT / "services").rglob("*.py")):
        for name in HIT_RE.findall(path.read_text()):
            marked.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert set(marked) == set(failpoints.BY_NAME), (
        f"registered but never hit: {sorted(set(failpoints.BY_NAME) - set(marked))}; "
        f"hit but not registered: {sorted(set(marked) - set(failpoints.BY_NAME))}"
    )
    for point in failpoints.REGISTRY:
        assert any(point.place.split()[0] == where for where in marked[point.name]), (point.name, marked[point.name])


def test_hitting_an_unregistered_name_while_armed_is_a_programming_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(failpoints.ENV, "bundle.file-before-record=kill@1000")
    failpoints.reset_for_tests()
    try:
        with pytest.raises(FailpointError):
            failpoints.hit("no.such-point")
    finally:
        monkeypatch.delenv(failpoints.ENV)
        failpoints.reset_for_tests()
