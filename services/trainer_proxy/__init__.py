"""The trainer-proxy: runs the operator's trainer once its plan is approved.

`app.py` routes the trigger to `planning/` (the plan, its launch, the corpus
splits, the input key and draft reuse: pure parts apart from the one use case
that stores the plan) and the approval to `execution/` (the executors, the
loss watch, the capture into the bundle); `checks/` probes the draft a clean
run left behind and times its cost. `errors.py` is the step's error family.
"""
