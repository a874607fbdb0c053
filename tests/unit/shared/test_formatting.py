"""The report's and the CLI's number spellings (services/shared/formatting.py): each helper gives the bytes the
copies it replaced gave, and one spelling for a missing value."""

from __future__ import annotations

import pytest

from services.shared.formatting import MISSING, concurrency, interval, joined, ms, number, percent, share

VALUES = (0.0, -0.0, 0.004, 0.5, 0.456, 1.0, 3.14159, -2.5, 12.3456, 99.95, 123.456, -1234.5)


def test_a_missing_value_is_one_dash_everywhere():
    assert MISSING == "-"
    assert {number(None, ".2f"), percent(None), percent(None, signed=False), share(None), ms(None),
            interval(None, 1.0), interval(1.0, None)} == {MISSING}


def test_a_concurrency_level_is_its_number_or_unlimited():
    assert [concurrency(c) for c in (1, 4, 64, None)] == ["1", "4", "64", "unlimited"]
    assert concurrency(8, prefix="c=") == "c=8" and concurrency(None, prefix="c=") == "unlimited"
    assert concurrency(None, unlimited="inf") == "inf" and concurrency(2, unlimited="inf") == "2"


@pytest.mark.parametrize("v", VALUES)
def test_each_helper_gives_the_bytes_of_the_copies_it_replaced(v: float):
    assert percent(v) == f"{v:+.1f} %"
    assert percent(v, signed=False) == f"{v:.1f} %"
    assert percent(v, decimals=2) == f"{v:+.2f} %"
    assert share(v) == f"{v:.0%}" and share(v, decimals=1) == f"{v:.1%}"
    assert ms(v) == f"{v:.2f} ms" and ms(v, decimals=1) == f"{v:.1f} ms"
    assert number(v, ".3g") == f"{v:.3g}" and number(v, "+.1f") == f"{v:+.1f}"
    assert interval(v, -v) == f"[{v:+.1f}, {-v:+.1f}]"


def test_worked_examples():
    assert percent(-14.25) == "-14.2 %" and percent(29.94, signed=False) == "29.9 %"
    assert share(0.456) == "46%" and ms(12.3456) == "12.35 ms" and interval(-53.5, 57.8) == "[-53.5, +57.8]"


def test_joined_keeps_the_parts_and_puts_the_separator_between_them():
    marker = object()
    assert joined([]) == ()
    assert joined(["a"]) == ("a",)
    assert joined(["a", marker, "c"]) == ("a", ", ", marker, ", ", "c")
    assert joined(iter(["a", "b"]), sep="; ") == ("a", "; ", "b")
