"""Idempotency ledger: which step keys are done, which are in flight, last errors.

Invariants: `done` is written only after the step's side effects are durable and its outputs published,
and a done key never runs again; the in-flight lease's TTL is shorter than the reclaim idle time, so a
dead owner's lease has expired before its message is reclaimable, and a live owner whose lease lapsed
takes it back on its next beat unless another took it or the step is done.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

import redis.asyncio as aioredis

DONE_TTL_S = 30 * 24 * 3600  # a run's idempotency memory outlives any campaign
ERROR_TTL_S = 7 * 24 * 3600


@dataclass(frozen=True)
class StepKey:
    service: str
    run_id: str
    schema: str
    step: str

    def render(self) -> str:
        return f"{self.service}:{self.run_id}:{self.schema}:{self.step}"


@dataclass(frozen=True)
class AckRef:
    """The stream entry a finished step acks, in the same transaction as its done mark."""

    stream: str
    group: str
    message_id: str


@dataclass(frozen=True)
class Finish:
    """A finished step's done mark, lease drop and ack, written by `finish` or together with
    the next entry's `begin` (`finish_then_begin`)."""

    key: StepKey
    owner: str
    outputs: list[str]
    ack: AckRef | None = None


# begin() outcomes
DONE = "done"
BEGUN = "begun"
BUSY = "busy"

# renew() outcomes: another owner holds the lease (or the step is done), the owner's lease
# was extended, or it had vanished and the owner took it back. RETAKEN is how a running
# step learns that Redis lost its leases (a restart, a flush, a failover, or an outage
# longer than the lease): other instances then cannot see each other's work for a while
# (services/runtime/delivery/reconcile.py waits for the owners to re-register before cleaning).
LOST = 0
RENEWED = 1
RETAKEN = 2


class Ledger(Protocol):
    async def is_done(self, key: StepKey) -> bool: ...
    async def begin(self, key: StepKey, owner: str, ttl_ms: int) -> str: ...
    async def renew(self, key: StepKey, owner: str, ttl_ms: int) -> int: ...
    async def release(self, key: StepKey, owner: str) -> None: ...
    async def finish(self, key: StepKey, owner: str, outputs: list[str], ack: AckRef | None = None) -> bool: ...
    async def finish_then_begin(self, done: Finish, key: StepKey, owner: str, ttl_ms: int) -> str: ...
    async def record_error(self, message_ref: str, error: str) -> None: ...
    async def last_error(self, message_ref: str) -> str | None: ...
    async def holders(self, service: str) -> dict[str, str]: ...
    async def age_s(self) -> float: ...


# Renew only if we still own the lease (compare-and-set in one script). A lease
# that lapsed while Redis was unreachable (restart, failover) is taken back by
# its owner when nobody else took it and the step is not done: the owner is
# still running the step, and without its lease a reclaimer would run it again.
_RENEW = """
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if not held and redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
return 0
"""
# The ledger's birth: Redis's own clock (ms) when the first service wrote to this ledger
# after Redis last lost it; written once, never expires. A young ledger means Redis started
# empty, was flushed or failed over to a replica without it (or the deployment is new):
# leases of live owners may not be back yet. Returns {born_ms, now_ms}.
_AGE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local born = redis.call('GET', KEYS[1])
if not born then
  redis.call('SET', KEYS[1], now)
  born = now
end
return {tonumber(born), now}
"""
# Done-check and lease in one step: a copy finishing between a separate check
# and lease would otherwise let a duplicate run the step again.
_BEGIN = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 'done'
end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 'begun'
end
return 'busy'
"""
# Done mark, lease drop and (with a third key, the stream) the ack in one
# script: one round trip instead of a MULTI/EXEC of three commands, and just as
# atomic (a script runs alone).
_FINISH = """
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('DEL', KEYS[2])
if #KEYS == 3 then
  redis.call('XACK', KEYS[3], ARGV[3], ARGV[4])
  return 1
end
return 0
"""
# A read batch's finish of one entry and begin of the next in one round trip
# (services/runtime/delivery/consumer.py, "deferred finish"): the finish comes first, exactly
# as two separate calls would run. KEYS: the finished step's done and lease keys,
# the next step's done and lease keys, then (optionally) the finished entry's
# stream. ARGV: outputs, done TTL, next owner, next lease TTL, then (with the
# stream) group and message ID. The begin part also answers 'begun' when the lease
# is already this owner's: a retry after a dropped connection repeats the whole
# script, and its first run may have taken the lease.
_FINISH_BEGIN = """
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('DEL', KEYS[2])
if #KEYS == 5 then
  redis.call('XACK', KEYS[5], ARGV[5], ARGV[6])
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  return 'done'
end
if redis.call('SET', KEYS[4], ARGV[3], 'NX', 'PX', ARGV[4]) then
  return 'begun'
end
if redis.call('GET', KEYS[4]) == ARGV[3] then
  redis.call('PEXPIRE', KEYS[4], ARGV[4])
  return 'begun'
end
return 'busy'
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisLedger:
    """The ledger in Redis under `<prefix>:ledger:`."""

    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self._begin = client.register_script(_BEGIN)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self._finish = client.register_script(_FINISH)
        self._finish_begin = client.register_script(_FINISH_BEGIN)
        self._age = client.register_script(_AGE)

    def _done(self, key: StepKey) -> str:
        return f"{self.prefix}:ledger:done:{key.render()}"

    def _inflight(self, key: StepKey) -> str:
        return f"{self.prefix}:ledger:inflight:{key.render()}"

    async def is_done(self, key: StepKey) -> bool:
        return bool(await self.client.exists(self._done(key)))

    async def begin(self, key: StepKey, owner: str, ttl_ms: int) -> str:
        outcome = await self._begin(keys=[self._done(key), self._inflight(key)], args=[owner, ttl_ms])
        return outcome.decode() if isinstance(outcome, bytes) else str(outcome)

    async def renew(self, key: StepKey, owner: str, ttl_ms: int) -> int:
        """Extend our lease (RENEWED), or take it back when it lapsed and is free (RETAKEN);
        LOST (0, falsy) when another owner holds it or the step is done."""
        return int(await self._renew(keys=[self._inflight(key), self._done(key)], args=[owner, ttl_ms]))

    async def release(self, key: StepKey, owner: str) -> None:
        await self._release(keys=[self._inflight(key)], args=[owner])

    async def finish(self, key: StepKey, owner: str, outputs: list[str], ack: AckRef | None = None) -> bool:
        """Mark done, drop the lease and (when given) ack the entry, atomically. True when acked."""
        keys = [self._done(key), self._inflight(key)]
        args: list[str | int] = [",".join(outputs) or "-", DONE_TTL_S]
        if ack is not None:
            keys.append(ack.stream)
            args += [ack.group, ack.message_id]
        await self._finish(keys=keys, args=args)
        return ack is not None

    async def finish_then_begin(self, done: Finish, key: StepKey, owner: str, ttl_ms: int) -> str:
        """`finish(done)` then `begin(key)`, atomically, in one round trip; begin's outcome.

        Safe to repeat after a dropped connection: the finish is idempotent, and a
        lease this owner already took answers 'begun' again."""
        keys = [self._done(done.key), self._inflight(done.key), self._done(key), self._inflight(key)]
        args: list[str | int] = [",".join(done.outputs) or "-", DONE_TTL_S, owner, ttl_ms]
        if done.ack is not None:
            keys.append(done.ack.stream)
            args += [done.ack.group, done.ack.message_id]
        outcome = await self._finish_begin(keys=keys, args=args)
        return outcome.decode() if isinstance(outcome, bytes) else str(outcome)

    async def record_error(self, message_ref: str, error: str) -> None:
        await self.client.set(f"{self.prefix}:ledger:error:{message_ref}", error[:4000], ex=ERROR_TTL_S)

    async def last_error(self, message_ref: str) -> str | None:
        value = await self.client.get(f"{self.prefix}:ledger:error:{message_ref}")
        return value.decode() if isinstance(value, bytes) else value

    async def holders(self, service: str) -> dict[str, str]:
        """In-flight step keys of a service -> owner (for reconcile)."""
        found: dict[str, str] = {}
        pattern = f"{self.prefix}:ledger:inflight:{service}:*"
        async for raw in self.client.scan_iter(match=pattern, count=500):
            name = raw.decode() if isinstance(raw, bytes) else raw
            owner = await self.client.get(name)
            if owner is not None:
                found[name.split(":ledger:inflight:", 1)[1]] = owner.decode() if isinstance(owner, bytes) else owner
        return found

    async def age_s(self) -> float:
        """Seconds since this ledger was born: since Redis last lost it (or the deployment's first service).

        Read, and the birth written when missing, in one script on Redis's clock, so
        instances on hosts whose clocks disagree see the same age."""
        born_ms, now_ms = await self.birth()
        return max(0.0, (now_ms - born_ms) / 1000)

    async def birth(self) -> tuple[int, int]:
        """The ledger's birth and Redis's time now, in ms on Redis's clock (the birth written when missing)."""
        born_ms, now_ms = await self._age(keys=[f"{self.prefix}:ledger:born"])
        return int(born_ms), int(now_ms)


class MemoryLedger:
    """In-process ledger for unit tests with the in-memory broker."""

    def __init__(self) -> None:
        self.born = time.monotonic()
        self.done: dict[StepKey, list[str]] = {}
        self.inflight: dict[StepKey, tuple[str, float]] = {}
        self.errors: dict[str, str] = {}

    def _live(self, key: StepKey) -> tuple[str, float] | None:
        held = self.inflight.get(key)
        if held and held[1] < time.monotonic():
            del self.inflight[key]
            return None
        return held

    async def is_done(self, key: StepKey) -> bool:
        return key in self.done

    async def begin(self, key: StepKey, owner: str, ttl_ms: int) -> str:
        if key in self.done:
            return DONE
        if self._live(key):
            return BUSY
        self.inflight[key] = (owner, time.monotonic() + ttl_ms / 1000)
        return BEGUN

    async def renew(self, key: StepKey, owner: str, ttl_ms: int) -> int:
        held = self._live(key)
        if (held and held[0] != owner) or (not held and key in self.done):
            return LOST
        self.inflight[key] = (owner, time.monotonic() + ttl_ms / 1000)
        return RENEWED if held else RETAKEN

    async def release(self, key: StepKey, owner: str) -> None:
        held = self._live(key)
        if held and held[0] == owner:
            del self.inflight[key]

    async def finish(self, key: StepKey, owner: str, outputs: list[str], ack: AckRef | None = None) -> bool:
        self.done[key] = list(outputs)
        self.inflight.pop(key, None)
        return False  # no PEL here: the transport acks

    async def finish_then_begin(self, done: Finish, key: StepKey, owner: str, ttl_ms: int) -> str:
        await self.finish(done.key, done.owner, done.outputs, done.ack)
        held = self._live(key)
        if key not in self.done and held and held[0] == owner:
            return BEGUN
        return await self.begin(key, owner, ttl_ms)

    async def record_error(self, message_ref: str, error: str) -> None:
        self.errors[message_ref] = error

    async def last_error(self, message_ref: str) -> str | None:
        return self.errors.get(message_ref)

    async def holders(self, service: str) -> dict[str, str]:
        return {k.render(): v[0] for k, v in list(self.inflight.items()) if k.service == service and self._live(k)}

    async def age_s(self) -> float:
        return time.monotonic() - self.born
