"""The steps of a campaign in flow order: a plain table, no models.

Its own module so that a reader of the names alone (the `specdec` parser's
`request STEP` choices, a run's status) does not build every event model of
contracts.events, which re-exports STEPS from here.
"""

from __future__ import annotations

# The steps of a campaign in flow order; `specdec request STEP RUN_ID` takes one.
STEPS: tuple[str, ...] = ("profile", "corpus", "capacity", "training", "bench", "gate", "report", "publish")
