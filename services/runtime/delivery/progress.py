"""Publishing a progress event (contracts/progress.py): once, capped, never failing the step.

Unlike a step's own events (StepContext.emit retries a dropped connection for a minute, and the
outbox records what it publishes), progress is for people watching and records nothing: a publish
that fails is logged and dropped, the next one a couple of seconds later replaces it, and a
stalled Redis never holds the step's watch loop for more than PUBLISH_TIMEOUT_S.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.exceptions import RedisError

from contracts.progress import PROGRESS_MAXLEN, StepProgress

PUBLISH_TIMEOUT_S = 2.0


async def publish_progress(bus: Any, event: StepProgress, log: Any) -> bool:
    """XADD the event onto `<prefix>.step.progress` capped at PROGRESS_MAXLEN; False (logged) when Redis did not
    take it."""
    if bus is None:  # a handler run outside a service (unit tests): nowhere to publish
        return False
    try:
        await asyncio.wait_for(bus.publish(event, maxlen=PROGRESS_MAXLEN), PUBLISH_TIMEOUT_S)
    except (TimeoutError, RedisError, OSError) as exc:
        log.info("a progress event did not reach Redis; the next one replaces it", step=event.step,
                 done=event.done, error=f"{type(exc).__name__}: {exc}")
        return False
    return True
