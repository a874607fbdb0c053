"""The trainer-proxy: runs the operator's trainer once its plan is approved.

Pure parts (plan, loss scanning, Slurm/Kubernetes rendering) are apart from
the executors (local, slurm), the capture into the bundle, the probes and the
entrypoint (app.py).
"""
