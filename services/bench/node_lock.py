"""One bench per node at a time: the node lock, held for a run's whole bench step.

Two runs benched on one node would measure each other. The lock is a lease of the delivery ledger
(services/runtime/delivery/ledger.py) on every node of the plan, taken before the first launch and renewed
at the heartbeat; its token is the fence, checked in Redis right before every launch, so a holder that
lost it launches nothing (`NodeLockLost`, transient). Waiting is queued, never failed
(docs/bench-runner.md#one-bench-per-node)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from services.runtime.delivery.ledger import BEGUN, LOST, Ledger, StepKey
from services.runtime.errors import SpecdecError

SERVICE = "bench-node"  # not a service's name: the ledger's step-lease scans never list these keys
_LOCK, _QUEUED = "lock", "queued"
# How often a waiting run tries the lock again: a second at most between one bench's end and the next's start.
POLL_S = 0.5


class NodeLockLost(SpecdecError):
    """This run's node lock was taken by another run (or expired) while its bench ran: it may not launch.

    Transient, not a `BenchError`: the step is retried, waits for the node again and adopts what it recorded."""


def _lock_key(node: str) -> StepKey:
    return StepKey(SERVICE, node, _LOCK, "bench")


def _queue_key(node: str, run_id: str) -> StepKey:
    return StepKey(SERVICE, node, _QUEUED, run_id)


def _holder_run(token: str) -> str:
    return token.split(" ", 1)[0]


@dataclass
class NodeHold:
    """The nodes one run's bench holds, and its token."""

    ledger: Ledger
    token: str
    ttl_ms: int
    nodes: list[str]
    lost: str | None = None

    async def check(self, node: str) -> None:
        """Right before a launch on `node`: the lock is still this token's (renewed in Redis), else `NodeLockLost`."""
        if node in self.nodes and self.lost is None and await self.ledger.renew(_lock_key(node), self.token,
                                                                                 self.ttl_ms) == LOST:
            self.lost = node
        if self.lost is not None:
            raise NodeLockLost(
                f"the bench lock on node {self.lost} is no longer this run's (another run took it, or it "
                "expired while Redis was away): nothing more is launched; the step is retried"
            )

    async def renew_all(self) -> None:
        for node in self.nodes:
            if self.lost is None and await self.ledger.renew(_lock_key(node), self.token, self.ttl_ms) == LOST:
                self.lost = node


@asynccontextmanager
async def hold(ledger: Ledger, run_id: str, instance: str, nodes: Iterable[str], *, ttl_ms: int, renew_s: float,
               log: Any) -> AsyncIterator[NodeHold]:
    """Wait until every node is this run's (in sorted order: two runs never hold one node each and wait for the
    other's), keep them renewed, and release them on the way out, whatever happens."""
    held = NodeHold(ledger, f"{run_id} {instance} {uuid.uuid4().hex[:12]}", ttl_ms, [])
    try:
        for node in sorted(set(nodes)):
            await _acquire(held, node, run_id, log)
            held.nodes.append(node)
        renewer = asyncio.create_task(_renew(held, renew_s))
        try:
            yield held
        finally:
            renewer.cancel()
    finally:
        for node in held.nodes:
            await asyncio.shield(ledger.release(_lock_key(node), held.token))


async def _acquire(held: NodeHold, node: str, run_id: str, log: Any) -> None:
    ledger, key, queued = held.ledger, _lock_key(node), _queue_key(node, run_id)
    announced = False
    try:
        while await ledger.begin(key, held.token, held.ttl_ms) != BEGUN:
            # Queued: say so (status reads it; renew takes the lease when it has none), keep the nodes
            # already taken, try again shortly.
            await ledger.renew(queued, held.token, held.ttl_ms)
            if not announced:
                holder = (await _holders(ledger)).get(f"{SERVICE}:{node}:{_LOCK}:bench")
                log.info("bench queued: another run's bench holds the node", node=node,
                         behind=_holder_run(holder) if holder else None)
                announced = True
            await held.renew_all()
            await asyncio.sleep(POLL_S)
    finally:
        await asyncio.shield(ledger.release(queued, held.token))


async def _renew(held: NodeHold, every_s: float) -> None:
    while True:
        await asyncio.sleep(every_s)
        try:
            await held.renew_all()
        except (RedisError, OSError):
            # Redis away for a moment: the next beat tries again; the launch check is what fences.
            continue


async def _holders(ledger: Ledger) -> dict[str, str]:
    return await ledger.holders(SERVICE)


async def queued(ledger: Ledger, run_id: str) -> tuple[str, str | None] | None:
    """(node, the run holding it) when `run_id`'s bench waits for a node, else None (status)."""
    leases = await _holders(ledger)
    for key in leases:
        service_node, _, rest = key.rpartition(f":{_QUEUED}:")
        if rest == run_id:
            node = service_node.removeprefix(f"{SERVICE}:")
            holder = leases.get(f"{SERVICE}:{node}:{_LOCK}:bench")
            return node, _holder_run(holder) if holder else None
    return None
