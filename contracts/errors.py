"""The root of every error specdec raises on purpose.

Contracts' own errors (an invalid event, an invalid argv template) and every
service's errors derive from `SpecdecError`, so a caller that wants "any specdec
error" catches one class. The families below it live where they are raised:
`contracts.registry.ContractError`, `contracts.argv.ArgvError`, and in the
services `services.runtime.errors.StepFailed` (a step's permanent failures,
with a reason and an error type the `<step>.failed` event carries).
"""

from __future__ import annotations


class SpecdecError(Exception):
    """Root of every error specdec raises on purpose.

    `transient` says whether trying again may succeed. A step's handler that
    raises a specdec error ends the step with `<step>.failed` unless the error
    is transient (services/runtime/errors.py): a bad input, template or
    artifact stays bad however often it is read.
    """

    transient: bool = False


class Problems(ValueError):
    """Every problem one model validator found, raised together so none hides behind the first.

    A ValueError, as pydantic expects of a validator; pydantic keeps the instance in the
    error's `ctx["error"]`, so a caller that names problems one a line (`specdec validate`)
    expands `problems`, and anyone else reads them joined by "; "."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)
