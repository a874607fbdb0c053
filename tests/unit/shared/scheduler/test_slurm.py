"""The shared sbatch (services.shared.scheduler.slurm): Slurm's answers parsed, the
labelled jobs selected by name and comment, and one argv for both steps' jobs."""

from __future__ import annotations

from services.shared.scheduler import slurm

RUN = "toy-20261130-010101-abcdef"


def test_slurm_output_parsing():
    assert slurm.parse_job_id("1234\n") == "1234" and slurm.parse_job_id("77;cluster\n") == "77"
    record = slurm.parse_record(
        "JobId=5 JobName=specdec-x JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0 Comment=experiment=x"
    )
    assert record["JobState"] == "FAILED" and record["Comment"] == "experiment=x"
    assert slurm.parse_exit(record["ExitCode"]) == (3, None)
    assert slurm.parse_exit("0:15") == (0, 15)
    listed = f"1|specdec-{RUN}|experiment={RUN}\n2|specdec-{RUN}|experiment=other\n3|other|experiment={RUN}\n"
    assert slurm.labelled_jobs(listed, RUN) == ["1"]



def test_one_sbatch_argv_renders_both_steps_jobs_in_a_fixed_order():
    common = ["sbatch", "--parsable", "--job-name", f"specdec-{RUN}", "--comment", f"experiment={RUN}",
              "--nodelist", "n1", "--nodes", "1"]
    # The trainer's job: a time limit, no task count, the script alone.
    trainer = slurm.sbatch_argv(run_id=RUN, node="n1", cwd="/w", stdout="/o", stderr="/e", script=["/job.py"],
                                partition="gpu", time_minutes=4)
    assert trainer == [*common, "--no-requeue", "--chdir", "/w", "--output", "/o", "--error", "/e",
                       "--time", "4", "--partition", "gpu", "/job.py"]
    # The bench's serve job: one task, accelerators, the script and its endpoint file.
    serve = slurm.sbatch_argv(run_id=RUN, node="n1", cwd="/w", stdout="/log", stderr="/log",
                              script=["/serve.py", "/endpoint.json"], ntasks=1, partition=None, gres="gpu:1")
    assert serve == [*common, "--ntasks", "1", "--no-requeue", "--chdir", "/w", "--output", "/log", "--error", "/log",
                     "--gres", "gpu:1", "/serve.py", "/endpoint.json"]
