"""Reconcile on start: clean labelled work that no live instance holds.

A service that died (SIGKILL, OOM) leaves children only if they escaped the
parent-death signal; a restarted service cleans them, by label only: a process
is killed only when it carries SPECDEC_SERVICE=<this service> and this service's
deployment label (SPECDEC_DEPLOYMENT: its Redis and stream prefix, whose ledger it
reads), and no in-flight lease of this service names its run. Another deployment's
work on the same host, or a process without a deployment label, is never touched.
"""

from __future__ import annotations

import os

from services.runtime.ledger import Ledger
from services.runtime.procs import Labelled, kill_group, labelled_processes


async def reconcile(service: str, ledger: Ledger, *, deployment: str, grace_s: float = 5.0) -> list[Labelled]:
    held_runs = {key.split(":", 2)[1] for key in await ledger.holders(service)}
    cleaned = []
    seen_groups: set[int] = set()
    for proc in labelled_processes(service, deployment=deployment):
        if proc.run_id in held_runs or proc.pgid in seen_groups or proc.pgid == os.getpgrp():
            continue
        seen_groups.add(proc.pgid)
        kill_group(proc.pgid, grace_s=grace_s)
        cleaned.append(proc)
    return cleaned
