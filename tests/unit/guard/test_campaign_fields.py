"""No inert configuration (docs/design.md#principle-1-no-inert-configuration): every campaign field (matrix
and serving contracts included), every selector key under its scheduler and
every list item changes what runs, under every command variant where it applies
(variants.py), and is refused naming it where it cannot apply.

For each field found by walking the campaign model (fields.py), its checker
(campaign_checks.py) changes that one value in the variant's campaign and the
guard (guard.py) asserts that an observable of what runs (observe.py: argv,
environment, job script, manifest, request bodies, capacity commands, training
launch, gate decision, publish call; never plan text or an identity echo)
changes. Known gaps stand in known.py as strict xfails, each with its reason.
A field consumed in some campaigns and a documented provenance label in others
stands in contracts/inert.py's INERT_WHERE: where its condition holds, its
checker must not apply, and submit must record it as inert (guard.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from pydantic import ValidationError

from contracts.campaign import Campaign
from contracts.inert import INERT, INERT_WHERE, inert_fields_set
from tests.unit.guard import known
from tests.unit.guard.campaign_checks import (
    CHECKS,
    ITEM_CHECKS,
    SELECTOR_CHECKS,
    SELECTOR_VALUES,
    item_checks,
)
from tests.unit.guard.fields import campaign_fields, list_fields, selector_keys
from tests.unit.guard.guard import judge
from tests.unit.guard.observe import OBSERVABLES, Refused, observe, submitted
from tests.unit.guard.variants import VARIANTS, uncovered_pairs


def unchecked(fields: list[str], checks: Mapping[str, object] = CHECKS) -> list[str]:
    """Fields with neither a checker nor an inert entry."""
    return sorted(set(fields) - set(checks) - set(INERT))


def _cases() -> list[object]:
    cases: list[object] = []
    for variant in VARIANTS:
        table = {**CHECKS, **SELECTOR_CHECKS, **item_checks(variant)}
        for field in sorted(table):
            case = f"{field} @ {variant.id}"
            marks = [pytest.mark.xfail(strict=True, reason=known.GAPS[case])] if case in known.GAPS else []
            cases.append(pytest.param(field, variant, table[field], id=case, marks=marks))
    return cases


def test_the_variants_cover_every_pair_of_axes():
    assert not uncovered_pairs(), f"pairs no variant checks: {uncovered_pairs()}"


def test_every_campaign_field_has_a_checker_or_stands_in_the_inert_table():
    missing = unchecked(campaign_fields())
    assert not missing, (
        f"campaign field(s) {missing} have no consumer shown: give each a checker in "
        "tests/unit/guard/campaign_checks.py (what changes when it changes, under which variants it applies), "
        "or, if it is accepted but inert by design, an entry in contracts/inert.py and docs/configuration.md "
        "with the reason"
    )
    assert not set(CHECKS) & set(INERT), "a field with a consumer must leave the inert table"
    stale = sorted((set(CHECKS) | set(INERT) | set(INERT_WHERE)) - set(campaign_fields()))
    assert not stale, f"checkers or inert entries name fields the campaign no longer has: {stale}"


def test_a_conditionally_inert_field_is_consumed_wherever_its_condition_does_not_hold(ctx):
    """An INERT_WHERE entry excuses a field only where it cannot apply: elsewhere its checker shows a consumer."""
    for field, entry in INERT_WHERE.items():
        assert field in CHECKS and field not in INERT, (
            f"{field}: a conditional inert entry needs a checker for where it is consumed"
        )
        for variant in VARIANTS:
            campaign = submitted(ctx, variant.data())
            assert not isinstance(campaign, Refused), f"{variant.id}: {campaign}"
            assert entry.holds(campaign) != CHECKS[field].applies(variant), (
                f"{field} under {variant.id}: INERT_WHERE ({entry.where}) and its checker's `applies` must be "
                "each other's complement")


def test_every_selector_key_and_list_has_a_checker():
    assert sorted(SELECTOR_CHECKS) == sorted(selector_keys()), "a key added to contracts/selectors.py needs a checker"
    assert sorted(SELECTOR_VALUES) == sorted((k.split("{")[1].split("}")[0], k.split(".")[-1]) for k in selector_keys())
    assert sorted(ITEM_CHECKS) == list_fields(), (
        f"list field(s) {sorted(set(list_fields()) - set(ITEM_CHECKS))} need an item checker in ITEM_CHECKS: "
        "every item must be shown consumed, not only the first"
    )


def test_the_known_gaps_name_cases_the_guard_has():
    cases = {f"{field} @ {v.id}" for v in VARIANTS for field in {**CHECKS, **SELECTOR_CHECKS, **item_checks(v)}}
    assert not set(known.GAPS) - cases, f"known gaps naming no case: {sorted(set(known.GAPS) - cases)}"


@pytest.mark.parametrize(("name", "variant"), [(n, v) for n in sorted(OBSERVABLES) for v in VARIANTS],
                         ids=[f"{n} @ {v.id}" for n in sorted(OBSERVABLES) for v in VARIANTS])
def test_every_observable_is_deterministic(name, variant, ctx):
    """Observed twice, uncached, a campaign gives the same result: a change is never noise."""
    campaign = submitted(ctx, variant.data())
    assert not isinstance(campaign, Refused), f"{variant.id}: the variant's campaign is refused: {campaign}"
    first = observe(ctx, campaign, name, cached=False)
    assert observe(ctx, campaign, name, cached=False) == first, f"{name} is not deterministic under {variant.id}"


@pytest.mark.parametrize(("field", "variant", "check"), _cases())
def test_changing_the_field_changes_what_runs(field, variant, check, ctx):
    verdict = judge(ctx, field, check, variant)
    assert verdict is None, verdict


@pytest.mark.parametrize("field", sorted(f for f, check in CHECKS.items() if not check.refused))
def test_setting_the_field_would_be_reported_if_it_were_inert(field, ctx, monkeypatch):
    """The submit-time warning and `inert.json` come from inert_fields_set: it must
    see every field an operator can set, under the name the guard gives it."""
    check = CHECKS[field]
    variant = next(v for v in VARIANTS if check.applies(v))
    data = variant.data()
    if check.base is not None:
        check.base(data, ctx)
    check.change(data, ctx)
    monkeypatch.setattr("contracts.inert.INERT", {field: "guard probe"})
    monkeypatch.setattr("contracts.inert.INERT_WHERE", {})
    try:
        campaign = Campaign.model_validate(data)
    except ValidationError:
        if not check.may_refuse:
            raise
        # The model refuses the change on its base (exploratory: false beside 2 trials): set it on the variant.
        data = variant.data()
        check.change(data, ctx)
        campaign = Campaign.model_validate(data)
    assert inert_fields_set(campaign) == {field: "guard probe"}
