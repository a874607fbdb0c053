"""One `sbatch`: how specdec submits, labels, watches and cancels a Slurm job.

Every job carries the label twice: `--job-name specdec-<run_id>` and
`--comment experiment=<run_id>`; cleanup cancels only jobs whose name and
comment both match. A job is watched with `scontrol show job -o` (no
accounting database needed) and, once the controller has forgotten it,
`sacct`. The trainer-proxy's batch job and the bench-runner's serve job build
their argv here and keep only their own script.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from services.shared.scheduler.errors import JobError
from services.shared.scheduler.runner import run_short

# States in which a job may still run (or start); any other state is final.
ACTIVE_STATES = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "STAGE_OUT", "SIGNALING"}
)
# squeue's format for the labelled-jobs listing: ID, name, comment.
LISTING_FORMAT = "%i|%j|%k"


def job_name(run_id: str) -> str:
    return f"specdec-{run_id}"


def comment(run_id: str) -> str:
    return f"experiment={run_id}"


def sbatch_argv(
    *,
    run_id: str,
    node: str,
    cwd: str,
    stdout: str,
    stderr: str,
    script: Sequence[str],
    partition: str | None = None,
    ntasks: int | None = None,
    time_minutes: int | None = None,
    gres: str | None = None,
) -> list[str]:
    """The exact sbatch argv: labelled, pinned to one node, never requeued.

    `script` is the batch script's path and its arguments, last on the line;
    the optional flags appear only when given, always in this order, so the
    same plan renders the same argv."""
    argv = [
        "sbatch", "--parsable",
        "--job-name", job_name(run_id),
        "--comment", comment(run_id),
        "--nodelist", node,
        "--nodes", "1",
    ]
    if ntasks is not None:
        argv += ["--ntasks", str(ntasks)]
    argv += ["--no-requeue", "--chdir", cwd, "--output", stdout, "--error", stderr]
    if time_minutes is not None:
        argv += ["--time", str(time_minutes)]
    if partition:
        argv += ["--partition", partition]
    if gres:
        argv += ["--gres", gres]
    return [*argv, *script]


def status_argv(job_id: str) -> list[str]:
    return ["scontrol", "show", "job", "-o", job_id]


def cancel_argv(job_id: str) -> list[str]:
    return ["scancel", job_id]


def accounting_argv(job_id: str) -> list[str]:
    return ["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "JobID,State,ExitCode"]


def listing_argv(run_id: str) -> list[str]:
    return ["squeue", "-h", "-n", job_name(run_id), "-o", LISTING_FORMAT]


def parse_job_id(stdout: str) -> str:
    """`sbatch --parsable` prints `ID` or `ID;cluster`."""
    head = stdout.strip().splitlines()[-1].split(";")[0].strip() if stdout.strip() else ""
    if not head.isdigit():
        raise JobError(f"sbatch printed {stdout.strip()!r}, not a job ID")
    return head


def parse_record(line: str) -> dict[str, str]:
    """`scontrol show job -o` (one line of Key=Value pairs) as a dict."""
    fields: dict[str, str] = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep and key and key not in fields:
            fields[key] = value
    return fields


def parse_exit(value: str) -> tuple[int | None, int | None]:
    """Slurm's `ExitCode=code:signal`; (code, signal) with a zero signal as None."""
    code, _, sig = value.partition(":")
    try:
        exit_code, signal = int(code), int(sig or 0)
    except ValueError:
        return None, None
    return (exit_code, signal or None)


def labelled_jobs(squeue_out: str, run_id: str) -> list[str]:
    """Job IDs from `squeue -h -o %i|%j|%k` whose name and comment both carry this run's label."""
    ids = []
    for line in squeue_out.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[1] == job_name(run_id) and parts[2] == comment(run_id):
            ids.append(parts[0])
    return ids


async def job_state(job_id: str) -> tuple[str, str]:
    """(JobState, the raw record) of a job; falls back to sacct once scontrol forgot it."""
    result = await asyncio.to_thread(run_short, status_argv(job_id))
    if result.exit_code == 0 and result.stdout.strip():
        record = result.stdout.strip()
        return parse_record(record).get("JobState", "UNKNOWN"), record
    acct = await asyncio.to_thread(run_short, accounting_argv(job_id))
    line = acct.stdout.strip().splitlines()[0] if acct.exit_code == 0 and acct.stdout.strip() else ""
    parts = line.split("|")
    if len(parts) == 3:
        return parts[1].split()[0], f"JobId={parts[0]} JobState={parts[1].split()[0]} ExitCode={parts[2]}"
    raise JobError(
        f"Slurm no longer knows job {job_id} (scontrol: {result.stderr.strip() or 'nothing'}; sacct: "
        f"{acct.stderr.strip() or 'nothing'}); raise MinJobAge or enable accounting so its end can be read"
    )


async def cancel_labelled(run_id: str) -> list[str]:
    """scancel the jobs still queued or running under this run's name and comment
    (selected by the label only); the job IDs cancelled."""
    listed = await asyncio.to_thread(run_short, listing_argv(run_id))
    if listed.exit_code != 0:
        raise JobError(f"squeue exited {listed.exit_code}: {listed.stderr.strip()}")
    ids = labelled_jobs(listed.stdout, run_id)
    for job_id in ids:
        await asyncio.to_thread(run_short, cancel_argv(job_id))
    return ids
