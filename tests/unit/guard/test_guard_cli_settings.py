"""No inert configuration (DESIGN.md, principle 1): every `specdec` argument and
every service setting changes what runs.

CLI: every argument of every subcommand, found by walking the parser, has a
checker (cli_checks.py): the command line with it changed must call, print or
return something else. Settings: every RuntimeSettings field found here has a
probe in tests/unit/test_settings_guard.py, whose tests run each probe and show
the field change a service's behaviour.
"""

from __future__ import annotations

import pytest

from tests.unit.guard.cli_checks import cli_checks, invoke
from tests.unit.guard.fields import cli_arguments, settings_fields
from tests.unit.test_settings_guard import PROBES

PREFIX = "cli specdec "


@pytest.fixture(scope="module")
def checks(ctx):
    return cli_checks(ctx)


def test_every_cli_argument_has_a_checker(checks):
    found = {name.removeprefix(PREFIX) for name in cli_arguments()}
    unchecked = sorted(found - set(checks))
    assert not unchecked, (
        f"specdec argument(s) {unchecked} have no consumer shown: add each to tests/unit/guard/cli_checks.py "
        "with a command line that changes only it"
    )
    assert not set(checks) - found, f"checkers name arguments the CLI no longer has: {sorted(set(checks) - found)}"


@pytest.mark.parametrize("argument", sorted(name.removeprefix(PREFIX) for name in cli_arguments()))
def test_changing_the_argument_changes_what_the_command_does(argument, checks):
    if argument not in checks:
        pytest.fail(f"specdec {argument} has no checker (see test_every_cli_argument_has_a_checker)")
    base, changed = checks[argument]
    before = invoke(base)
    assert invoke(base) == before, f"specdec {' '.join(base)} is not deterministic: it cannot show {argument}"
    assert invoke(changed) != before, f"specdec {argument} changed nothing the command calls, prints or returns"


def test_every_setting_has_a_probe():
    assert {f"env SPECDEC_{name.upper()}" for name in PROBES} == set(settings_fields())
