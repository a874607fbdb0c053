"""Issue #14's items as guard cases (items.py): each is refused with a clear error
or consumed. An item whose fix has not landed stands in PENDING as a strict
xfail with the item's name, so its case flips when the fix lands."""

from __future__ import annotations

import pytest

from tests.unit.guard.items import ITEMS

# item -> why it is expected to fail today (removed with the change that fixes it)
PENDING: dict[str, str] = {}


@pytest.mark.parametrize("item", [
    pytest.param(name, marks=[pytest.mark.xfail(strict=True, reason=PENDING[name])] if name in PENDING else [])
    for name in ITEMS
])
def test_the_item_is_refused_or_consumed(item, ctx):
    problems = ITEMS[item](ctx)
    assert not problems, f"issue #14, {item!r}:\n  " + "\n  ".join(problems)
