"""The shared runner's SubprocessRunner (services.shared.scheduler.runner): argv without a
shell, exit codes, missing programs, timeouts that kill the group."""

from __future__ import annotations

import os
import sys
import time

import pytest

from services.shared.scheduler.errors import CommandMissing
from services.shared.scheduler.runner import SubprocessRunner


def test_argv_runs_without_a_shell_and_reports_exit_and_output(tmp_path):
    marker = tmp_path / "touched"
    result = SubprocessRunner()(
        [sys.executable, "-c", "import sys; print(sys.argv[1]); sys.exit(3)", f"; touch {marker}"], timeout_s=10
    )
    assert result.exit_code == 3 and not result.ok and not result.timed_out
    assert result.stdout.strip() == f"; touch {marker}" and not marker.exists()


def test_extra_env_reaches_the_child():
    result = SubprocessRunner({"SLURM_CONF": "/x/slurm.conf"})(
        [sys.executable, "-c", "import os; print(os.environ['SLURM_CONF'])"], timeout_s=10)
    assert result.ok and result.stdout.strip() == "/x/slurm.conf"


def test_missing_program_is_command_missing():
    with pytest.raises(CommandMissing, match="no-such-scheduler-cmd"):
        SubprocessRunner()(["no-such-scheduler-cmd", "--version"], timeout_s=5)


def test_timeout_kills_the_whole_group(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(60)"
    )
    started = time.monotonic()
    result = SubprocessRunner()([sys.executable, "-c", script], timeout_s=1.5)
    assert result.timed_out and result.exit_code is None and time.monotonic() - started < 10
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        # A killed grandchild is reparented and reaped by init; until then it is a zombie.
        try:
            if open(f"/proc/{grandchild}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"grandchild {grandchild} survived the timeout")


def test_run_short_raises_when_the_scheduler_does_not_answer():
    from services.shared.scheduler.errors import CommandTimedOut
    from services.shared.scheduler.runner import run_short

    with pytest.raises(CommandTimedOut, match="did not answer within 1 s"):
        run_short([sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=1)
    assert run_short([sys.executable, "-c", "print('ok')"]).stdout.strip() == "ok"
