"""The "accepted but inert" table (docs/design.md#principle-1-no-inert-configuration).

A campaign field listed here is accepted by the contract but nothing consumes
it yet; setting it logs a warning at submit and is recorded in the run's
bundle (`inert.json`). A field leaves this table in the change that gives it a
consumer; the guard (tests/unit/guard/) fails on an operator-settable field
that is neither shown consumed nor listed here.

`INERT_WHERE` holds the fields consumed in some campaigns and inert in others
(a provenance label that only a training reads, on a campaign that trains
nothing): they are warned on and recorded only where their condition holds, and
the guard accepts them there only when submit does record them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, RootModel

INERT: dict[str, str] = {
    "source_revisions.specdec": (
        "`specdec submit` replaces it with specdec's own revision (git describe of its checkout, else its "
        "package version), so the evidence names the code that really ran; the operator's value is dropped"
    ),
    "source_revisions.suffix_decoding": (
        "`specdec submit` replaces it with the arctic-inference version installed in its own interpreter where "
        "that serves the suffix cells (none otherwise: another interpreter is never run to ask), so the evidence "
        "names the package that really ran; the operator's value is dropped"
    ),
}


def _trains_nothing(model: BaseModel) -> bool:
    # Duck-typed so this module needs no campaign import: Campaign.trains_nothing (traffic.shapes, or no
    # cell serving the trained draft).
    return bool(getattr(model, "trains_nothing", False))


@dataclass(frozen=True)
class InertWhere:
    """A field inert only where `holds(campaign)`: `where` says when, in the table's words."""

    where: str
    holds: Callable[[BaseModel], bool]
    reason: str

    def recorded(self) -> str:
        """The reason as the warning and inert.json give it."""
        return f"{self.where}: {self.reason}"


def _unreviewed_external_publish(model: BaseModel) -> bool:
    # Duck-typed (Campaign.publishes_externally, review.pre_approve, acknowledgements): the acknowledgement is
    # given, the target is external, and the policy that would use it is absent.
    acknowledged = getattr(getattr(model, "acknowledgements", None), "i_understand_this_publishes_externally", False)
    steps = getattr(getattr(model, "review", None), "pre_approve", [])
    return bool(acknowledged and getattr(model, "publishes_externally", False) and "publish" not in steps)


INERT_WHERE: dict[str, InertWhere] = {
    # Elsewhere it enters the training input key (an earlier identical draft is reused only under the
    # same revision). Nothing else compares targets: every arm serves the same one.
    "source_revisions.target": InertWhere(
        where="where nothing is trained (traffic.shapes, or no cell serves `{training.output}`)",
        holds=_trains_nothing,
        reason="provenance label: printed in the report and the bundle, changes no run",
    ),
    # Elsewhere it makes a folder publish live, or goes with review.pre_approve: [publish] (which needs it).
    # An external target gets only reviewed evidence: a call carrying the acknowledgement after a dry run of
    # the same report, or the campaign's policy (services/publisher/publish/publish_review.py).
    "acknowledgements.i_understand_this_publishes_externally": InertWhere(
        where="true with an external publish.target (s3://, https://, http://) and review.pre_approve without publish",
        holds=_unreviewed_external_publish,
        reason="the publisher service records a dry run and sends nothing: list publish in review.pre_approve for "
        "a live publish from that dry run, or publish it with `specdec publish RUN_ID "
        "--i-understand-this-publishes-externally` (the MCP tool's argument) after reviewing it",
    ),
}


def fields_set(model: BaseModel, prefix: str = "") -> list[str]:
    """Dotted paths of every field the operator set explicitly (not defaults).

    Items of a list of models are walked too, named with `[]` as the guard
    tests name them (`matrix.cells[].serving.dtype`), so an inert field inside
    a cell is found as well as one at the top level.
    """
    paths: list[str] = []
    for name in sorted(model.model_fields_set):
        path = f"{prefix}{name}"
        paths.append(path)
        value: Any = getattr(model, name)
        if _is_group(value):
            paths.extend(fields_set(value, prefix=f"{path}."))
        elif isinstance(value, list):
            for item in value:
                if _is_group(item):
                    paths.extend(fields_set(item, prefix=f"{path}[]."))
    return list(dict.fromkeys(paths))


def _is_group(value: Any) -> bool:
    # A RootModel (an argv template) is one value, not a group of fields.
    return isinstance(value, BaseModel) and not isinstance(value, RootModel)


def inert_fields_set(model: BaseModel) -> dict[str, str]:
    """Entries of the inert table under which `model` sets a field -> the reason
    (an `INERT_WHERE` entry only where its condition holds for `model`)."""
    entries = dict(INERT)
    entries.update({field: entry.recorded() for field, entry in INERT_WHERE.items() if entry.holds(model)})
    found = {}
    for path in fields_set(model):
        for entry, reason in entries.items():
            if path == entry or path.startswith(entry + "."):
                found[entry] = reason
                break
    return found


def markdown_table() -> str:
    """The table as docs/configuration.md shows it (a test keeps the two equal)."""
    rows = ["| campaign field | why it is inert |", "| --- | --- |"]
    rows += [f"| `{field}` | {reason} |" for field, reason in INERT.items()]
    rows += [f"| `{field}` {entry.where} | {entry.reason} |" for field, entry in INERT_WHERE.items()]
    return "\n".join(rows) + "\n"
