"""Submitting a campaign: the file read, checked, stored in a new run's bundle and published.

`prepare.py` (the campaign file read, checked and resolved, nothing stored), `submit.py` (create the
run, store the campaign, publish campaign.submitted), `validate.py` (every
check submit makes, nothing created), the canonical matrix file read into a campaign
(`canonical.py`, its `vllm bench serve` command `canonical_bench.py`, its command tokens
`canonical_tokens.py`), the suffix cells' package version at submit (`suffix_cells.py`), and `next_run.py` (the
campaign file that proves a run's predicted k, written for a later submit).
"""
