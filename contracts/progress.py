"""`step.progress`, version 1: how far a long step is, for people watching; not evidence.

The trainer-proxy relays its trainer's step, total and loss (as the campaign's
commands.train.progress declares them), the bench-runner its measured windows out
of the plan's; each with an estimate of the time left. Both publish onto one
stream, `<prefix>.step.progress`, at most one event every few seconds per step.

Progress is not journaled: it says nothing the step's own events and artifacts do
not record (training.completed, each bench.trial.completed), and a campaign's
minutes of it would crowd the run's events.jsonl. So it is outside the catalogue
(contracts/catalogue.py, `PROGRESS_PRODUCERS`): no service reads it through a consumer group,
the journal takes none of it, catch-up never publishes it again, and its stream is
capped at XADD (`MAXLEN ~ PROGRESS_MAXLEN`) instead of being trimmed by the journal.
`specdec watch` and `specdec demo` read it as it arrives (XREAD), nothing else does;
one lost (a Redis restart) is simply not shown, the next one replaces it.

This module imports the envelope only: `watch` reads the stream within its budget.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts.envelope import Event
from contracts.streams import PROGRESS_SCHEMA  # the one progress stream's schema: `<prefix>.step.progress`

# Entries the stream keeps (XADD MAXLEN ~): minutes of two steps' events at one per ~2 s, which is
# all a reader that attaches late needs (it shows the latest per step); older ones carry nothing.
PROGRESS_MAXLEN = 500
# The steps that report progress, and their unit of work.
PROGRESS_UNITS: dict[str, str] = {"training": "step", "bench": "trial"}


class StepProgress(Event):
    """How far a long step is: work done out of the total, with the time spent and an estimate of the time left.

    Not journaled, its stream capped (contracts/progress.py): a reader shows the latest one per run and step."""

    SCHEMA = PROGRESS_SCHEMA
    VERSION = 1
    step: Literal["training", "bench"] = Field(
        description="The step reporting; its owner (contracts.catalogue.STEP_OWNER) produced the event.")
    done: int = Field(ge=0, description="Units of work done so far (training: the trainer's last printed step; "
                      "bench: measured windows, one per trial and concurrency level, adopted ones included).")
    total: int | None = Field(ge=1, description="Units the step will do in all; None when unknown (a trainer "
                              "that prints no total). The bench's is the plan's most (sequential rounds may stop "
                              "sooner) less what its failed cells will not measure.")
    unit: Literal["step", "trial"] = Field(description="What `done` counts: 'step' (training), 'trial' (bench).")
    loss: float | None = Field(allow_inf_nan=False, description="The trainer's last finite loss as it printed it; "
                               "None for the bench, or when the trainer prints none.")
    eta_s: float | None = Field(ge=0, description="Estimated seconds left; None while nothing allows an estimate "
                                "(no total, nothing done yet). Training: elapsed / done * (total - done); bench: the "
                                "mean measured window times the windows left plus the mean launch (start to ready) "
                                "times the launches left.")
    elapsed_s: float = Field(ge=0, description="Seconds since the step's work started (the trainer's launch, the "
                             "bench plan's execution).")
