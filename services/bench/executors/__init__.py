"""Where servers run (local, Slurm, Kubernetes) and what they run (engine read-back)."""
