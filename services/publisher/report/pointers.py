"""The identity an arm's figures carry in the report's tables: the pointer to its row in the identity table,
and the columns every table of measured numbers repeats after it (the report's sections and the prediction's)."""

from __future__ import annotations

from services.publisher.report.document import Ref
from services.publisher.report.model import ArmLevel, CampaignData, arm_key
from services.shared.formatting import MISSING, concurrency


def id_cols(arm: ArmLevel) -> tuple:
    """The pointer, the cell, the concurrency, the trials (found/declared) and the named baseline."""
    return (Ref(arm.key), arm.cell_id, concurrency(arm.concurrency), f"{len(arm.trials)}/{arm.trials_declared or '?'}",
            arm.baseline_cell_id or MISSING)


def arm_ref(data: CampaignData, cell: str, level: int | None) -> Ref | str:
    """A pointer to the arm's identity row; plain text when the bundle has no such arm (named outside the bundle)."""
    key = arm_key(cell, level)
    return Ref(key) if data.arm(cell, level) is not None else f"{key} (no identity in this bundle)"
