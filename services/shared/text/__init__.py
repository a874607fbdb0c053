"""Text utilities the profiler, the corpus step and the bench-runner share.

One parser and one set of rules, so a record means the same in every step: its token counts and
content class are the ones its traffic line gave the profile, and the bench renders prompts with the
chat template the corpus step render-checked.
"""
