"""One health wait: poll a server's `GET /health` until it answers 200.

Each executor knows how its server can die and where it answers (a child
process on a loopback port, a batch job that writes an endpoint file, a Pod
behind port-forward); it passes that as `locate`, which raises when the server
is gone and returns its base URL once known (None until then). The wait owns
the rest: the poll, the deadline, the time to ready.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import httpx

# Per request; a server that takes longer to answer /health is not ready yet.
REQUEST_TIMEOUT_S = 2.0


async def wait_healthy(
    locate: Callable[[], Awaitable[str | None]],
    *,
    timeout_s: float,
    poll_s: float,
    not_ready: Callable[[], BaseException],
    started: float | None = None,
) -> float:
    """Seconds from `started` (default: now, monotonic) until /health answered 200.

    Each round calls `locate` first (it raises when the server died), then asks
    /health; past `timeout_s` it raises what `not_ready()` returns."""
    began = time.monotonic() if started is None else started
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S) as client:
        while True:
            base_url = await locate()
            if base_url is not None:
                try:
                    if (await client.get(f"{base_url}/health")).status_code == 200:
                        return time.monotonic() - began
                except httpx.TransportError:
                    pass
            if time.monotonic() - began > timeout_s:
                raise not_ready()
            await asyncio.sleep(poll_s)
