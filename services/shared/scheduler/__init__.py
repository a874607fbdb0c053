"""Scheduler adapters the trainer-proxy and the bench-runner share, each once.

- `runner`: one way to run a short command (argv, no shell, a timeout):
  `CommandRunner`, `SubprocessRunner`, `run_short`;
- `slurm`: one `sbatch`: the argv, the `specdec-<run>` job name and the
  `experiment=<run>` comment label, job-ID parsing, job state (scontrol, then
  sacct), the labelled jobs and `scancel`;
- `kubernetes`: the experiment labels and their selector, delete-by-label
  argv, DNS-1123 names, and the bundle volume of a specdec pod;
- `local`: label cleanup of this machine's labelled process groups;
- `health`: waiting until a server's /health answers;
- `errors`: what these raise (`SchedulerError`, a `StepFailed`).

What only one step renders (the trainer's job script and Job, the bench's
serve job, Pod and endpoint file) stays in that step and calls these.
"""
