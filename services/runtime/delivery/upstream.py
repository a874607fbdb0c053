"""What an earlier step of a run produced, for a step started by `<step>.requested`.

An event of the flow carries the refs its consumer needs (`capacity.selected`
the corpus, `training.completed` the placement, the draft and the corpus), so a
step triggered by one reads the event and nothing else. A request
(`specdec request STEP RUN_ID`) carries only the inputs the operator named; for
the rest, the step reads the run's latest upstream event from its journal,
parsed with that event's contract (older versions upcast), never as a loose dict.
"""

from __future__ import annotations

from typing import TypeVar

from contracts.envelope import Event
from contracts.registry import ContractError, Registry, default_registry
from services.runtime.bundle.bundle import BundleStore

E = TypeVar("E", bound=Event)

_REGISTRY: Registry | None = None


def _registry() -> Registry:
    global _REGISTRY  # built once, on first use, never at import time
    if _REGISTRY is None:
        _REGISTRY = default_registry()
    return _REGISTRY


def latest(bundle: BundleStore, run_id: str, model: type[E]) -> E | None:
    """The run's latest `model` event in its journal; None when it has none.

    A journal line that no longer validates is skipped (the journal keeps every
    line as it arrived; the dead-letter stream already reported it)."""
    for line in reversed(bundle.events(run_id)):
        if line.get("schema") != model.SCHEMA:
            continue
        try:
            event = _registry().parse(line)
        except ContractError:
            continue
        if isinstance(event, model):
            return event
    return None
