"""The "accepted but inert" table (DESIGN.md, principle 1).

A campaign field listed here is accepted by the contract but nothing consumes
it yet; setting it logs a warning at submit and is recorded in the run's
bundle (`inert.json`). A field leaves this table in the change that gives it a
consumer; the guard tests fail on an operator-settable field that is neither
consumed nor listed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

INERT: dict[str, str] = {
    # Empty: every campaign field has a consumer (the guard tests show which).
}


def fields_set(model: BaseModel, prefix: str = "") -> list[str]:
    """Dotted paths of every field the operator set explicitly (not defaults)."""
    paths: list[str] = []
    for name in sorted(model.model_fields_set):
        path = f"{prefix}{name}"
        paths.append(path)
        value: Any = getattr(model, name)
        if isinstance(value, BaseModel) and not hasattr(value, "root"):
            paths.extend(fields_set(value, prefix=f"{path}."))
    return paths


def inert_fields_set(model: BaseModel) -> dict[str, str]:
    """Entries of the inert table under which `model` sets a field -> the reason."""
    found = {}
    for path in fields_set(model):
        for entry, reason in INERT.items():
            if path == entry or path.startswith(entry + "."):
                found[entry] = reason
                break
    return found


def markdown_table() -> str:
    """The table as docs/configuration.md shows it (a test keeps the two equal)."""
    rows = ["| campaign field | why it is inert |", "| --- | --- |"]
    rows += [f"| `{field}` | {reason} |" for field, reason in INERT.items()]
    return "\n".join(rows) + "\n"
