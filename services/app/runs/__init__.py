"""Operating runs: what a user does with a run once it exists, live over Redis or offline over its bundle.

`ops.py` (approve, request, status, watch, dead letters), `resume.py` (a lost trigger published
again), `plans.py` (plan show), `gate.py` (the gate's decision, offline), `report.py` (render,
publish), with what they read: `streams.py` (events read back from the streams), `progress.py` (a
run's step states, pure) and `rounds_status.py` (a sequential campaign's cost).
"""
