"""The campaign workflow's tools, as an agent walks it: evidence_init, campaign_init, campaign_run, publish.

`workflow.py` (the typed steps: a run and its bundle, the campaign stored, a dry run, live),
`verbs.py` (each verb's parser over its `args`) and `verb_calls.py` (each verb run from its parsed
`args` over the same use cases).
"""
