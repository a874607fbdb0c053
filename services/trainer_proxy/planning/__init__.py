"""Planning a training: what would run, where, with which inputs, or which earlier draft is reused.

The plan's model, its builder and its staging (the trigger's handler, which stores it), one launch per
executor kind (Slurm's batch script and Kubernetes' Job rendered, pure), the corpus splits, the training
input key and draft reuse.
"""
