"""Known gaps: guard cases that fail today, each a strict xfail with its reason.

A case is `<field> @ <variant id>` (the test ids of test_campaign_fields.py). An
entry is removed in the change that fixes it: the case then passes, and its
strict xfail fails until the entry goes. Every entry here was found by this
guard and is outside issue #14's list (all of that list's items pass: see
test_items.py); each reason says what a fix would be.

None today: the last three (source_revisions.trainer and .target, and
matrix.load.ignore_eos, on shapes campaigns) were closed by refusing the
trainer's revision there, listing the target's in contracts/inert.py's
INERT_WHERE, and honouring an explicit ignore_eos for shaped prompts.
"""

from __future__ import annotations

GAPS: dict[str, str] = {}
