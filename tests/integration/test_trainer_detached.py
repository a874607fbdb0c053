"""A local trainer outlives its trainer-proxy; a restarted proxy re-attaches to it, with real processes.

The "proxy" here is a child process that runs the local executor (run_local) and is
SIGKILLed while its trainer runs, as a crashed trainer-proxy; the test then re-attaches as
the restarted instance does (docs/trainer-proxy.md, "Redelivery").
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.runtime.processes.procs import end_labelled, labelled_processes
from services.trainer_proxy.planning.model import LocalLaunch
from tests.support.cli_runs import ensure_slurm
from tests.support.waiting import alive, wait_for

ROOT = Path(__file__).resolve().parents[2]

# argv: OUT SLEEP_S [nan]: prints a loss, optionally a non-finite one, sleeps, writes its output.
TRAINER = textwrap.dedent("""
    import os, sys, time
    out, sleep_s = sys.argv[1], float(sys.argv[2])
    print("step 1 loss=2.5", flush=True)
    if sys.argv[3:] == ["nan"]:
        print("step 2 loss=nan", flush=True)
    time.sleep(sleep_s)
    with open(os.path.join(out, "weights.bin"), "wb") as fh:
        fh.write(b"trained")
    print("step 3 loss=1.5", flush=True)
""")

# A trainer-proxy stand-in: runs the local executor and prints the handle once the trainer started.
PROXY = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from services.trainer_proxy.execution.local import run_local
    from services.trainer_proxy.planning.model import LocalLaunch

    async def started(handle):
        print(handle, flush=True)

    launch = LocalLaunch.model_validate_json(sys.argv[1])
    asyncio.run(run_local(launch, run_id=sys.argv[2], run_dir=Path(sys.argv[3]), timeout_s=120, kill_grace_s=1,
                          on_started=started))
""")


@pytest.fixture
def run_id() -> Iterator[str]:
    run = f"detached-{uuid.uuid4().hex[:8]}"
    yield run
    end_labelled(run, grace_s=0.5)


def launch_of(tmp_path: Path, sleep_s: float, *extra: str) -> LocalLaunch:
    out = tmp_path / "out"
    out.mkdir()
    return LocalLaunch(argv=[sys.executable, "-c", TRAINER, str(out), str(sleep_s), *extra], cwd=str(tmp_path),
                       env_added={}, stdout_path="training/stdout.log", stderr_path="training/stderr.log")


def crashed_proxy(launch: LocalLaunch, run_id: str, run_dir: Path) -> int:
    """Start the proxy stand-in, wait for its trainer to start, SIGKILL the proxy; the trainer's pid."""
    proxy = subprocess.Popen(
        [sys.executable, "-c", PROXY.format(root=str(ROOT)), launch.model_dump_json(), run_id, str(run_dir)],
        stdout=subprocess.PIPE, cwd=ROOT,
    )
    assert proxy.stdout is not None
    handle = int(proxy.stdout.readline().decode().strip())
    proxy.send_signal(signal.SIGKILL)
    proxy.wait()
    return handle


def reattach(launch: LocalLaunch, run_id: str, run_dir: Path, *, timeout_s: float = 120):
    from services.trainer_proxy.execution.detached import reattach as reattach_local

    return asyncio.run(reattach_local(launch, run_id=run_id, run_dir=run_dir, timeout_s=timeout_s, kill_grace_s=1))


def test_a_trainer_outlives_its_proxy_and_a_restarted_proxy_reads_how_it_ended(tmp_path: Path, run_id: str) -> None:
    launch = launch_of(tmp_path, 1.5)
    run_dir = tmp_path / "bundle" / run_id
    trainer = crashed_proxy(launch, run_id, run_dir)
    time.sleep(0.3)
    assert alive(trainer), "the trainer died with its proxy"
    assert [p for p in labelled_processes() if p.pid == trainer and p.run_id == run_id], "the trainer lost its label"
    wait_for(lambda: not alive(trainer), 30, "the trainer to finish")

    outcome = reattach(launch, run_id, run_dir)

    assert outcome is not None, "the finished trainer's outcome was not recorded"
    assert outcome.exit_code == 0 and outcome.signal is None and not outcome.interrupted
    assert outcome.duration_s >= 1.5 and outcome.handle == str(trainer)
    assert (tmp_path / "out/weights.bin").read_bytes() == b"trained"
    assert "step 3 loss=1.5" in (run_dir / "training/stdout.log").read_text()


def test_a_restarted_proxy_waits_for_a_live_trainer_and_keeps_its_timeout(tmp_path: Path, run_id: str) -> None:
    launch = launch_of(tmp_path, 60)
    run_dir = tmp_path / "bundle" / run_id
    trainer = crashed_proxy(launch, run_id, run_dir)

    outcome = reattach(launch, run_id, run_dir, timeout_s=3)

    assert outcome is not None and outcome.timed_out and outcome.exit_code is None and outcome.signal is not None
    assert not alive(trainer)
    assert [p for p in labelled_processes() if p.run_id == run_id] == []


def test_a_restarted_proxy_stops_a_trainer_whose_loss_went_non_finite(tmp_path: Path, run_id: str) -> None:
    launch = launch_of(tmp_path, 60, "nan")
    run_dir = tmp_path / "bundle" / run_id
    trainer = crashed_proxy(launch, run_id, run_dir)

    outcome = reattach(launch, run_id, run_dir)

    assert outcome is not None and outcome.stopped_for_loss and outcome.non_finite is not None
    assert not alive(trainer)


def test_a_trainer_killed_with_its_proxy_is_interrupted(tmp_path: Path, run_id: str) -> None:
    launch = launch_of(tmp_path, 60)
    run_dir = tmp_path / "bundle" / run_id
    crashed_proxy(launch, run_id, run_dir)
    for pgid in {p.pgid for p in labelled_processes() if p.run_id == run_id}:
        os.killpg(pgid, signal.SIGKILL)
    wait_for(lambda: not [p for p in labelled_processes() if p.run_id == run_id], 10, "the trainer to die")

    assert reattach(launch, run_id, run_dir) is None, "nothing was left to re-attach to"


def test_an_earlier_launch_that_left_no_record_is_interrupted(tmp_path: Path, run_id: str) -> None:
    # A launch recorded (training/argv.json) by a proxy that died before its trainer started.
    assert reattach(launch_of(tmp_path, 1), run_id, tmp_path / "bundle" / run_id) is None



def test_the_trainer_runs_in_its_folder_relative_to_the_services(tmp_path: Path, run_id: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from services.trainer_proxy.execution.local import run_local

    monkeypatch.chdir(tmp_path)
    (tmp_path / "work").mkdir()
    launch = LocalLaunch(argv=[sys.executable, "-c", "import os; print(os.getcwd())"], cwd="work", env_added={},
                         stdout_path="training/stdout.log", stderr_path="training/stderr.log")
    run_dir = tmp_path / "bundle" / run_id

    async def started(handle: str) -> None:
        return None

    outcome = asyncio.run(run_local(launch, run_id=run_id, run_dir=run_dir, timeout_s=30, kill_grace_s=1,
                                    on_started=started))

    assert outcome.exit_code == 0
    assert (run_dir / "training/stdout.log").read_text().strip() == str(tmp_path / "work")


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "index-record-lost"])
def test_a_re_capture_keeps_the_manifest_an_earlier_delivery_wrote(tmp_path: Path, recorded: bool) -> None:
    """A delivery that died between the output manifest and the capture: the next one captures the run
    as it finds it (here: interrupted, a partial run) and keeps the earlier manifest, never writing
    training/outputs.json again with other bytes (artifacts are write-once)."""
    from types import SimpleNamespace

    from contracts import layout
    from services.runtime.bundle.bundle import BundleStore
    from services.trainer_proxy.execution.capture import capture_run, hash_outputs
    from services.trainer_proxy.execution.monitor import RunOutcome

    bundle = BundleStore(tmp_path / "bundles", fsync=False)
    run_id = "toy-recapture-1"
    bundle.create_run(run_id)
    out = bundle.run_dir(run_id) / layout.TRAINING_OUTPUT_DIR
    out.mkdir(parents=True)
    (out / "weights.bin").write_bytes(b"trained")
    launch = launch_of(tmp_path, 0)
    plan = SimpleNamespace(run_id=run_id, launch=launch, output_dir=str(out), checkpoint_subdir=None,
                           executor="local", node="local-node")
    earlier = bundle.run_dir(run_id) / layout.TRAINING_OUTPUTS
    if recorded:
        hash_outputs(bundle, run_id, output_dir=out, partial=False)
    else:
        # Published whole, but the crash came before the index recorded it.
        # (The same manifest, made in a scratch bundle holding the same output.)
        scratch = BundleStore(tmp_path / "scratch", fsync=False)
        scratch.create_run(run_id)
        (scratch.run_dir(run_id) / layout.TRAINING_OUTPUT_DIR).mkdir(parents=True)
        (scratch.run_dir(run_id) / layout.TRAINING_OUTPUT_DIR / "weights.bin").write_bytes(b"trained")
        hash_outputs(scratch, run_id, output_dir=out, partial=False)
        earlier.write_bytes((scratch.run_dir(run_id) / layout.TRAINING_OUTPUTS).read_bytes())
    before = earlier.read_bytes()
    lost = RunOutcome(handle="unknown", launched_argv=launch.argv, exit_code=None, signal=None, duration_s=0.0,
                      interrupted=True)

    capture, _, manifest = capture_run(bundle, plan, "0" * 64, lost)  # type: ignore[arg-type]  # the plan's fields it reads

    assert capture.interrupted and earlier.read_bytes() == before
    assert not manifest.partial and [f.path for f in manifest.files] == ["weights.bin"]
    assert bundle.ref(run_id, layout.TRAINING_OUTPUTS).sha256 == capture.outputs.sha256


# --- Slurm: a job outlives its service by nature; a restarted one reads it back -----------------

SLURM_PROXY = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from services.trainer_proxy.execution.slurm import run_slurm
    from services.trainer_proxy.planning.model import SlurmLaunch

    async def started(handle):
        print(handle, flush=True)

    launch = SlurmLaunch.model_validate_json(sys.argv[1])
    asyncio.run(run_slurm(launch, run_id=sys.argv[2], service="trainer-proxy", run_dir=Path(sys.argv[3]),
                          timeout_s=120, kill_grace_s=1, on_started=started))
""")


@pytest.fixture(scope="module")
def slurm_env() -> dict[str, str]:
    return ensure_slurm()


def test_a_restarted_proxy_reads_how_a_slurm_job_ended(tmp_path: Path, run_id: str, slurm_env: dict[str, str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from services.shared.scheduler import slurm
    from services.trainer_proxy.execution.slurm import reattach_slurm
    from services.trainer_proxy.planning.model import SlurmLaunch
    from services.trainer_proxy.planning.slurm_job import job_script

    for key, value in slurm_env.items():
        monkeypatch.setenv(key, value)
    sinfo = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, check=True)
    node = sinfo.stdout.split()[0]
    run_dir = tmp_path / "bundle" / run_id
    (run_dir / "training").mkdir(parents=True)
    argv = [sys.executable, "-c", "import time; print('step 1 loss=2.5', flush=True); time.sleep(2)"]
    script = run_dir / "training/slurm-job.py"
    script.write_text(job_script(argv, run_id=run_id, service="trainer-proxy"))
    launch = SlurmLaunch(
        argv=argv, cwd=str(tmp_path), job_name=slurm.job_name(run_id), comment=slurm.comment(run_id),
        job_script=script.read_text(), job_script_path="training/slurm-job.py",
        sbatch_argv=slurm.sbatch_argv(run_id=run_id, node=node, cwd=str(tmp_path),
                                      stdout=str(run_dir / "training/stdout.log"),
                                      stderr=str(run_dir / "training/stderr.log"), script=[str(script)],
                                      time_minutes=3),
        status_argv=slurm.status_argv("{job_id}"), cancel_argv=slurm.cancel_argv("{job_id}"),
        stdout_path="training/stdout.log", stderr_path="training/stderr.log",
    )
    proxy = subprocess.Popen(
        [sys.executable, "-c", SLURM_PROXY.format(root=str(ROOT)), launch.model_dump_json(), run_id, str(run_dir)],
        stdout=subprocess.PIPE, cwd=ROOT,
    )
    assert proxy.stdout is not None
    job_id = proxy.stdout.readline().decode().strip()
    proxy.send_signal(signal.SIGKILL)
    proxy.wait()

    outcome = asyncio.run(reattach_slurm(launch, run_dir=run_dir, timeout_s=120, kill_grace_s=1))

    assert outcome is not None and outcome.handle == job_id, outcome
    assert outcome.exit_code == 0 and not outcome.timed_out and "JobState=COMPLETED" in (outcome.scheduler_record or "")
    assert "step 1 loss=2.5" in (run_dir / "training/stdout.log").read_text()
