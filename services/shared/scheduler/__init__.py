"""Scheduler adapters the trainer-proxy and the bench-runner share, each written once.

The command runner, Slurm's sbatch/state/cancel, Kubernetes' labels and names, local label cleanup,
the /health wait and their errors. What only one step renders (the trainer's job script and Job, the
bench's serve job and Pod) stays in that step and calls these.
"""
