"""No inert configuration (DESIGN.md, principle 1): every campaign field
(matrix and serving contracts included) changes what runs.

For each field found by walking the campaign model, its checker changes that
one value in the complete example campaign and asserts that the observable it
names (a plan, a launched argv, a profile, a corpus, a decision, a publish,
the report) changes; the same campaign observed twice must give the same
result, so a change is never noise.
"""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from contracts.campaign import Campaign
from contracts.inert import INERT, inert_fields_set
from tests.unit.guard.campaign_checks import CHECKS
from tests.unit.guard.context import example
from tests.unit.guard.fields import campaign_fields
from tests.unit.guard.observe import Refused


def test_every_campaign_field_has_a_checker_or_stands_in_the_inert_table():
    fields = set(campaign_fields())
    unchecked = sorted(fields - set(CHECKS) - set(INERT))
    assert not unchecked, (
        f"campaign field(s) {unchecked} have no consumer shown: give each a checker in "
        "tests/unit/guard/campaign_checks.py (what changes when it changes), or, if it is accepted but inert by "
        "design, an entry in contracts/inert.py and docs/configuration.md with the reason"
    )
    assert not set(CHECKS) & set(INERT), "a field with a consumer must leave the inert table"
    stale = sorted((set(CHECKS) | set(INERT)) - fields)
    assert not stale, f"checkers or inert entries name fields the campaign no longer has: {stale}"


@pytest.mark.parametrize("field", sorted(CHECKS))
def test_changing_the_field_changes_what_runs(field, ctx):
    check = CHECKS[field]
    data = example()
    if check.base is not None:
        check.base(data, ctx)
    base = Campaign.model_validate(data)
    changed = copy.deepcopy(data)
    check.change(changed, ctx)
    if check.refused is not None:
        with pytest.raises(ValidationError, match=check.refused):
            Campaign.model_validate(changed)
        return
    before = check.observe(ctx, base)
    assert check.observe(ctx, base) == before, f"{check.observe.__name__} is not deterministic: it cannot show {field}"
    after = check.observe(ctx, Campaign.model_validate(changed))
    if not check.may_refuse:
        for name, value in (("example", before), ("changed", after)):
            assert not isinstance(value, Refused), f"{field}: the {name} campaign was refused: {value}"
    # Two refusals differ by the values they quote, which shows no consumer.
    assert not (isinstance(before, Refused) and isinstance(after, Refused)), f"{field}: both campaigns were refused"
    assert before != after, f"campaign field {field} changed nothing that {check.observe.__name__} shows"


@pytest.mark.parametrize("field", sorted(f for f, check in CHECKS.items() if check.refused is None))
def test_setting_the_field_would_be_reported_if_it_were_inert(field, ctx, monkeypatch):
    """The submit-time warning and `inert.json` come from inert_fields_set: it must
    see every field an operator can set, under the name the guard gives it."""
    check = CHECKS[field]
    data = example()
    if check.base is not None:
        check.base(data, ctx)
    check.change(data, ctx)
    monkeypatch.setattr("contracts.inert.INERT", {field: "guard probe"})
    assert inert_fields_set(Campaign.model_validate(data)) == {field: "guard probe"}
