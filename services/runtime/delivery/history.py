"""A young ledger at start: a fresh Redis, or one that lost this deployment's state?

Redis lost its state when something outside it says it held some: the deployment's marker in the bundle
root names an earlier ledger birth, or the bundle holds unfinished runs; otherwise the start is fresh and
said at info (docs/delivery.md#reconcile-after-a-reset). One marker per deployment, under a folder no
run ID can name.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import Any

import orjson

from services.runtime.bundle.bundle import BundleError, BundleStore
from services.runtime.bundle.repair import finished
from services.runtime.delivery.ledger import RedisLedger

MARKER_DIR = ".ledger-births"
# How many unfinished runs a warning names (a bundle root may hold many).
NAMED_RUNS = 3


def marker_path(root: Path, deployment: str) -> Path:
    return Path(root) / MARKER_DIR / f"{hashlib.sha256(deployment.encode()).hexdigest()[:16]}.json"


def marked_birth(root: Path, deployment: str) -> int | None:
    """The ledger birth (Redis's clock, ms) the deployment's last start found; None when none is marked."""
    try:
        data = orjson.loads(marker_path(root, deployment).read_bytes())
        return int(data["born_ms"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def mark(root: Path, deployment: str, born_ms: int) -> None:
    """Record the ledger birth this start found (write then rename: a reader never sees half a file).
    Best effort: a bundle root that cannot take it only loses the next start's evidence."""
    path = marker_path(root, deployment)
    if marked_birth(root, deployment) == born_ms:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.{os.getpid()}")
        temp.write_bytes(orjson.dumps({"deployment": deployment, "born_ms": born_ms}))
        os.replace(temp, path)
    except OSError:
        pass


def unfinished_runs(bundle: BundleStore, limit: int = NAMED_RUNS) -> list[str]:
    """Up to `limit` runs of the bundle root whose journal does not end the run."""
    found = []
    for run_id in bundle.list_runs():
        try:
            if not finished(bundle.events(run_id)):
                found.append(run_id)
        except (BundleError, OSError):
            continue
        if len(found) >= limit:
            break
    return found


def lost_state(bundle: BundleStore, deployment: str, born_ms: int | None) -> str | None:
    """Why Redis is known to have held this deployment's state before the ledger born at `born_ms`
    (None: unknown); None when nothing says it did (a fresh Redis or a new deployment)."""
    marked = marked_birth(bundle.root, deployment)
    if marked is not None and born_ms is not None and marked < born_ms:
        return f"a ledger of this deployment was born earlier (at {marked} ms, Redis's clock; now {born_ms} ms)"
    runs = unfinished_runs(bundle)
    if runs:
        return f"the bundle holds runs not finished ({', '.join(runs)}{', ...' if len(runs) >= NAMED_RUNS else ''})"
    return None


async def ledger_lost_state(ledger: Any, bundle: BundleStore, deployment: str) -> str | None:
    """`lost_state` for a service's ledger (the birth read from Redis; a ledger without one has no marker)."""
    born = (await ledger.birth())[0] if isinstance(ledger, RedisLedger) else None
    return await asyncio.to_thread(lost_state, bundle, deployment, born)


async def mark_ledger(ledger: Any, bundle: BundleStore, deployment: str) -> None:
    """`mark` the birth of a service's ledger (nothing for a ledger outside Redis)."""
    if isinstance(ledger, RedisLedger):
        await asyncio.to_thread(mark, bundle.root, deployment, (await ledger.birth())[0])
