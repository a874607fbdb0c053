"""What the MCP tools return beyond the use cases' own results (services/app): the plan with its text."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from contracts.envelope import Strict


class PlanShown(Strict):
    """plan_show: one stored plan, as `specdec <step> plan RUN_ID` prints it, and the document."""

    run_id: str = Field(description="The run.")
    step: Literal["training", "bench"] = Field(description="The step.")
    uri: str = Field(description="The plan's bundle URI (a resource).")
    sha256: str = Field(description="The hash an approval names.")
    text: str = Field(description="The CLI's rendering: file, sha256, approval state, every command.")
    document: dict[str, Any] = Field(description="The plan document as stored.")
