"""The capacity check against a REAL single-node Slurm (Debian's slurm-wlm and
munge, started by infra/bin/ensure-slurm on loopback).

Only jobs these tests submit are cancelled, by their IDs. If Slurm cannot be
installed or started, the tests fail with the script's message: they never skip.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.campaign import CapacitySpec
from services.shared.capacity.check import check_node
from services.shared.scheduler.runner import SubprocessRunner

ROOT = Path(__file__).resolve().parents[2]
RUN = "toy-20261130-000000-51u4m0"
NODE = socket.gethostname().split(".")[0]
# Exit 0 only when asked about this very node: proves {node} reached the check.
IDLE_IF_THIS_NODE = [sys.executable, "-c", f"import sys; sys.exit(0 if sys.argv[1] == {NODE!r} else 1)", "{node}"]


@pytest.fixture(scope="session")
def slurm_env() -> dict[str, str]:
    done = subprocess.run([str(ROOT / "infra/bin/ensure-slurm")], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        pytest.fail(f"infra/bin/ensure-slurm exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    env = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert "SLURM_CONF" in env, f"ensure-slurm printed no SLURM_CONF: {done.stdout!r}"
    return env


@pytest.fixture
def runner(slurm_env: dict[str, str]) -> SubprocessRunner:
    return SubprocessRunner(slurm_env)


class Jobs:
    """Jobs this test submitted; cancelled by ID at teardown, and waited out."""

    def __init__(self, runner: SubprocessRunner) -> None:
        self.runner = runner
        self.ids: list[str] = []

    def submit(self, *args: str) -> str:
        result = self.runner(["sbatch", "--parsable", "--output=/dev/null", *args], timeout_s=30)
        assert result.ok, f"sbatch failed: {result.stderr}"
        job_id = result.stdout.strip().split(";")[0]
        self.ids.append(job_id)
        return job_id

    def state(self, job_id: str) -> str:
        return self.runner(["squeue", "--noheader", f"--jobs={job_id}", "--format=%T"], timeout_s=30).stdout.strip()

    def wait_state(self, job_id: str, want: str, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.state(job_id) == want:
                return
            time.sleep(0.2)
        pytest.fail(f"job {job_id} did not reach {want} in {timeout_s} s (now {self.state(job_id)!r})")

    def cancel_all(self) -> None:
        for job_id in self.ids:
            self.runner(["scancel", job_id], timeout_s=30)
        for job_id in self.ids:
            self.wait_state(job_id, "")  # gone from the queue: the node is free again


@pytest.fixture
def jobs(runner: SubprocessRunner) -> Iterator[Jobs]:
    submitted = Jobs(runner)
    yield submitted
    submitted.cancel_all()


def spec(idle_check: list[str]) -> CapacitySpec:
    return CapacitySpec(scheduler="slurm", selectors={"partition": "debug"}, idle_check=idle_check)


def test_an_idle_node_is_selected(runner):
    verdict = check_node(spec(IDLE_IF_THIS_NODE), None, run_id=RUN, runner=runner)
    assert verdict.idle and verdict.node == NODE, verdict.reasons
    assert verdict.nodes[0].partitions == ["debug"] and verdict.nodes[0].cpus
    assert [c.name for c in verdict.captures] == ["sinfo", "squeue", f"idle-check-{NODE}"]
    assert verdict.verdicts[0].idle_check and verdict.verdicts[0].idle_check.argv[-1] == NODE


def test_a_node_busy_with_another_experiments_job_is_never_selected(runner, jobs):
    job = jobs.submit("--wrap", "sleep 60", "--job-name", "other", "--comment", "experiment=other-run")
    jobs.wait_state(job, "RUNNING")
    # A feature claiming idleness changes nothing, and neither does an idle check that says idle.
    claim = runner(["scontrol", "update", f"NodeName={NODE}",
                    "AvailableFeatures=specdec-idle", "ActiveFeatures=specdec-idle"], timeout_s=30)
    assert claim.ok, claim.stderr
    try:
        for asked in (None, NODE):
            verdict = check_node(spec(["true"]), asked, run_id=RUN, runner=runner)
            assert not verdict.idle and verdict.node is None
            assert verdict.nodes[0].labels.get("feature.specdec-idle") == "true"
            assert any(f"slurm job {job} 'other'" in r and "experiment=other-run" in r
                       for r in verdict.reasons), verdict.reasons
            assert verdict.verdicts[0].idle_check is None, "the idle check is not asked about a busy node"
    finally:
        runner(["scontrol", "update", f"NodeName={NODE}", "AvailableFeatures=", "ActiveFeatures="], timeout_s=30)


def test_a_failing_idle_check_makes_the_node_unavailable(runner):
    verdict = check_node(spec([sys.executable, "-c", "import sys; sys.exit(1)", "{node}", "{run_id}"]), None,
                         run_id=RUN, runner=runner)
    assert not verdict.idle and verdict.node is None
    assert len(verdict.reasons) == 1 and f"node {NODE}: idle check" in verdict.reasons[0]
    assert verdict.reasons[0].endswith("exited 1 (0 means idle)")
    assert verdict.verdicts[0].idle_check and verdict.verdicts[0].idle_check.argv[-2:] == [NODE, RUN]
