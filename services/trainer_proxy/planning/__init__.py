"""Planning a training: what would run, where, with which inputs, or which earlier draft is reused.

`planning.py` (the trigger's use case: placement, corpus splits and their
provenance, the stored plan), `plan.py` (the plan, pure), `launch.py` (one
launch per executor kind, what the executors read), `slurm_job.py` and
`kubernetes.py` (the batch script and the Job, rendered, pure), `inputs.py`
(whether a campaign trains, the corpus splits), `input_key.py` (the training
input key, pure) and `reuse.py` (finding an earlier run's identical draft and
copying it).
"""
