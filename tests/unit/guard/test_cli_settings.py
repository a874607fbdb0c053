"""No inert configuration (docs/design.md#principle-1-no-inert-configuration): every argument of every
command line and every service setting changes what runs.

CLI: every argument of every subcommand of `specdec`, of `specdec demo` and of
the container health check, found by walking their parsers (fields.py), and
every name a step reads as a request input, has a checker (cli_checks.py): the
command line with it changed must call, print or return something else.
Settings: every RuntimeSettings field found here has a probe in
tests/unit/guard/test_runtime_settings.py, whose tests run each probe and show the
field change a service's behaviour.
"""

from __future__ import annotations

import pytest

from tests.unit.guard.cli_checks import cli_checks, invoke, request_input_keys
from tests.unit.guard.fields import cli_arguments, settings_fields
from tests.unit.guard.test_runtime_settings import PROBES

PREFIX = "cli "
ARGUMENTS = sorted([name.removeprefix(PREFIX) for name in cli_arguments()] + request_input_keys())


@pytest.fixture(scope="module")
def checks(ctx):
    return cli_checks(ctx)


def test_every_cli_argument_has_a_checker(checks):
    unchecked = sorted(set(ARGUMENTS) - set(checks))
    assert not unchecked, (
        f"argument(s) {unchecked} have no consumer shown: add each to tests/unit/guard/cli_checks.py "
        "with a command line that changes only it"
    )
    assert not set(checks) - set(ARGUMENTS), (
        f"checkers name arguments no CLI has: {sorted(set(checks) - set(ARGUMENTS))}"
    )


def test_the_walk_sees_demo_and_the_health_check():
    assert {"specdec demo --campaign", "healthcheck check --port"} <= set(ARGUMENTS)


@pytest.mark.parametrize("argument", ARGUMENTS)
def test_changing_the_argument_changes_what_the_command_does(argument, checks):
    if argument not in checks:
        pytest.fail(f"{argument} has no checker (see test_every_cli_argument_has_a_checker)")
    base, changed = checks[argument]
    before = invoke(base)
    assert invoke(base) == before, f"{' '.join(base)} is not deterministic: it cannot show {argument}"
    after = invoke(changed)
    assert after != before, f"{argument} changed nothing the command calls, prints or returns"
    assert not isinstance(before[1], str), f"{' '.join(base)} is refused: {before[1]}"


def test_every_setting_has_a_probe():
    assert {f"env SPECDEC_{name.upper()}" for name in PROBES} == set(settings_fields())
