"""The guard's verdict on one field under one variant (docs/design.md#principle-1-no-inert-configuration).

`judge` returns None when the field is shown consumed (or rightly refused, or
absent) under the variant, else a message naming the field, the variant and
what was seen. The tests (test_campaign_fields.py, test_self.py,
test_items.py) assert on it, so a synthetic field or a consumer taken
away can be shown to be reported by name.

The rules:
- where the field applies: the base campaign (the variant, plus the check's
  `base`) is accepted by submit and by every observed consumer; the changed one
  changes at least one observable of what runs, or (with `may_refuse`) is
  refused; a change that is always refused (`refused`) must be refused at
  submit, naming the field;
- where it does not apply: setting it is refused, by submit or by a consumer
  that reads the campaign, with an error naming the field; or it is absent
  (its container is a plain value under this variant); or it stands in the
  documented inert table for such campaigns (contracts/inert.py INERT_WHERE)
  and `specdec submit` records it as inert (warning, inert.json). Any other
  field accepted there is reported: either it does apply (the table is wrong)
  or it is accepted and ignored (the defect the guard exists for).
"""

from __future__ import annotations

import copy

from contracts import inert
from tests.unit.guard.campaign_checks import Check
from tests.unit.guard.context import Ctx
from tests.unit.guard.edits import NotHere
from tests.unit.guard.observe import (
    Refused,
    names,
    observe_data,
    refusals,
    small,
    submitted,
)
from tests.unit.guard.variants import Variant


def judge(ctx: Ctx, field: str, check: Check, variant: Variant) -> str | None:
    where = f"{field} under {variant.id}"
    data = variant.data()
    if not check.applies(variant):
        return _elsewhere(ctx, field, check, variant, data=data)
    if check.base is not None:
        check.base(data, ctx)
    before = observe_data(ctx, data, check.sees)
    refused = refusals(before)
    if refused:
        return f"{where}: the base campaign is refused, so the change cannot show a consumer: {refused[0]}"
    changed = copy.deepcopy(data)
    try:
        check.change(changed, ctx)
    except NotHere:
        return f"{where}: the field is absent under this variant, where its checker says it applies"
    after = observe_data(ctx, changed, check.sees)
    if check.refused:
        if isinstance(after, Refused) and names(after, field):
            return None
        return f"{where}: the change must be refused at submit, naming the field; got {small(after)}"
    refused = refusals(after)
    if refused:
        if check.may_refuse:
            return None
        return f"{where}: the changed campaign is refused ({refused[0]}); change it to a value that is accepted"
    if before == after:
        return (f"campaign field {where} changed nothing that runs ({', '.join(check.sees)}): give it a consumer "
                f"there, refuse it there with an error naming it, or list it in contracts/inert.py with the reason")
    return None


def _elsewhere(ctx: Ctx, field: str, check: Check, variant: Variant, *, data: dict) -> str | None:
    where = f"{field} under {variant.id}"
    changed = copy.deepcopy(data)
    try:
        (check.elsewhere or check.change)(changed, ctx)
    except NotHere:
        return None  # absent: its container is a plain value here
    after = observe_data(ctx, changed, check.sees)
    refused = refusals(after)
    if any(names(r, field) for r in refused):
        return None
    if refused:
        return f"{where}: setting it is refused, but the error does not name it: {refused[0]}"
    before = observe_data(ctx, data, check.sees)
    if before != after:
        return (f"{where}: the guard's table says it does not apply here, yet setting it changes what runs "
                f"({', '.join(check.sees)}): widen its `applies` in tests/unit/guard/campaign_checks.py")
    if recorded_inert(ctx, changed, field):
        return None
    return (f"{where}: the field cannot apply under this variant, yet setting it is accepted and changes nothing "
            f"({', '.join(check.sees)}): refuse it with an error naming it")


def recorded_inert(ctx: Ctx, data: dict, field: str) -> bool:
    """Whether the field stands in the conditional inert table for this campaign and submit
    records it so (the operator is warned and inert.json names it): accepted but inert, documented."""
    if field not in inert.INERT_WHERE:  # read at call time: a test may take an entry away
        return False
    campaign = submitted(ctx, data)
    return not isinstance(campaign, Refused) and field in inert.inert_fields_set(campaign)
