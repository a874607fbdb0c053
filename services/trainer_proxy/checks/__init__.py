"""Checking the draft a clean run left behind: the probes and its forward cost.

`probes.py` (the built-in probes on a draft model and the operator's probe
argv), `speculators_format.py` (the built-in probes for a head in speculators'
format) and `draft_cost.py` (the draft's forward cost per token against the
target's, evidence only).
"""
