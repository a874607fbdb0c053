"""Known gaps: guard cases that fail today, each a strict xfail with its reason.

A case is `<field> @ <variant id>` (the test ids of test_guard_campaign.py). An
entry is removed in the change that fixes it: the case then passes, and its
strict xfail fails until the entry goes. Every entry here was found by this
guard and is outside issue #14's list (all of that list's items pass: see
test_guard_items.py); each reason says what a fix would be.
"""

from __future__ import annotations

SHAPES_VARIANTS = (
    "operator-serve,operator-bench,local,shapes",
    "operator-serve,builtin-bench,slurm,shapes",
    "builtin-serve,builtin-bench,kubernetes,shapes",
)
BUILTIN_BENCH_SHAPES_VARIANTS = (
    "operator-serve,builtin-bench,slurm,shapes",
    "builtin-serve,builtin-bench,kubernetes,shapes",
)

_TRAINER_REVISION = (
    "finding (not in issue #14's list): source_revisions.trainer enters only the training input key; a shapes "
    "campaign trains nothing, so the value is accepted and only printed in the report. Refuse it on shapes "
    "campaigns like commands.train (contracts/campaign.py, Campaign._check_shapes_only)"
)
_TARGET_REVISION = (
    "finding (not in issue #14's list): source_revisions.target enters only the training input key; a shapes "
    "campaign trains nothing, so the value is accepted and only printed in the report. Either record it where the "
    "gate compares arms (the served target's revision in every trial's identity) or refuse it on shapes campaigns"
)
_IGNORE_EOS = (
    "finding (not in issue #14's list): shaped prompts always set ignore_eos (services/bench/prompts.py "
    "shaped_prompts), so matrix.load.ignore_eos is ignored by the builtin load generator on a shapes campaign "
    "(and an operator bench is told the campaign's value while the prompts file says true). Honour the field for "
    "shapes, or refuse ignore_eos: false there and default it to true"
)

GAPS: dict[str, str] = {
    **{f"source_revisions.trainer @ {v}": _TRAINER_REVISION for v in SHAPES_VARIANTS},
    **{f"source_revisions.target @ {v}": _TARGET_REVISION for v in SHAPES_VARIANTS},
    **{f"matrix.load.ignore_eos @ {v}": _IGNORE_EOS for v in BUILTIN_BENCH_SHAPES_VARIANTS},
}
