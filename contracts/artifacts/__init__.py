"""The evidence bundle's artifact schemas: what one step writes for another (or a later run) to read.

`profile` (profile/PROFILE.json), `suffix` (profile/SUFFIX_PREDICTION.json), `corpus` (CORPUS.jsonl and its
manifest), `training` (training/outputs.json, the input key), `offline_acceptance` (the trainer's estimate),
`results` (trial result files) and `trials` (reading one), `speculation` (the rule over the engine's spec-decode
counters), `engine` (what a running engine reports beside its cell), `decision` (gate/DECISION.json) and `report`
(report/report.json). Each module is versioned on its own; no I/O here. Where each file lives is
`contracts.layout`.
"""
