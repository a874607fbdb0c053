"""Trimming the streams once nothing needs their entries from Redis (docs/delivery.md#trimming).

Redis is the transport, events.jsonl the record: an entry leaves its stream only once the journal holds
it, every group of the stream has acked it, every reader the catalogue names has its group, and it is
older than SPECDEC_STREAM_RETENTION_S. The groups are read and the stream cut in one Lua script
(`allow-oom`), so a group created or reset in between cannot be missed."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from contracts.catalogue import CATALOGUE, JOURNAL
from contracts.streams import stream_name

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from services.runtime.settings import RuntimeSettings

# A stream is trimmed at most once a second, on the journal's next event of it: one round trip a
# second per busy stream, instead of one per event. Every SWEEP_S every stream is trimmed as well,
# so a stream gone quiet, whose readers acked after its last trim, does not keep its last second.
# What a stream holds is then what some group has not acked, and at most SWEEP_S of events.
INTERVAL_S = 1.0
SWEEP_S = 5.0

# Each stream's readers, whose groups must exist before it is trimmed (the journal's among them).
READERS: dict[str, tuple[str, ...]] = {spec.schema: (*spec.consumers, JOURNAL) for spec in CATALOGUE}

# KEYS[1]: the stream; ARGV[1]: the retention in ms; ARGV[2...]: the groups that must exist.
# Returns the number of entries trimmed.
# Stream IDs are compared as (milliseconds, sequence): both are exact in Lua's doubles for any
# ID Redis generates (milliseconds below 2^53).
TRIM_SCRIPT = """#!lua flags=allow-oom
local stream = KEYS[1]
if redis.call('EXISTS', stream) == 0 then return 0 end
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return {tonumber(ms), tonumber(seq)}
end
local function below(a, b)
  return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2])
end
local cut = nil
local seen = {}
for _, group in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
  local info = {}
  for i = 1, #group, 2 do info[group[i]] = group[i + 1] end
  seen[info['name']] = true
  local needed
  if info['pending'] > 0 then
    needed = parse(redis.call('XPENDING', stream, info['name'])[2])
  else
    local last = parse(info['last-delivered-id'])
    needed = {last[1], last[2] + 1}
  end
  if cut == nil or below(needed, cut) then cut = needed end
end
if cut == nil then return 0 end
for i = 2, #ARGV do
  if not seen[ARGV[i]] then return 0 end
end
local now = redis.call('TIME')
local horizon = {tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - tonumber(ARGV[1]), 0}
if below(horizon, cut) then cut = horizon end
if cut[1] < 0 then return 0 end
return redis.call('XTRIM', stream, 'MINID', string.format('%d-%d', cut[1], cut[2]))
"""


def script_arguments(prefix: str, schema: str, retain_ms: int) -> list[str | int]:
    """The trim script's key and arguments for one stream."""
    return [stream_name(prefix, schema), retain_ms, *READERS.get(schema, (JOURNAL,))]


def trim_arguments(settings: RuntimeSettings, schema: str) -> list[str | int]:
    """The script's key and arguments as the journal trims with its settings (SPECDEC_STREAM_RETENTION_S)."""
    return script_arguments(settings.stream_prefix, schema, round(settings.stream_retention_s * 1000))


async def trim_stream(client: aioredis.Redis, prefix: str, schema: str, *, retain_ms: int = 0) -> int:
    """Trim `<prefix>.<schema>` below the oldest entry a group still needs, and below what is younger
    than `retain_ms` (Redis's clock: entry IDs are its milliseconds); the number of entries removed."""
    return int(await client.eval(TRIM_SCRIPT, 1, *script_arguments(prefix, schema, retain_ms)))


class Trimmer:
    """The journal's trimming: each stream after its events, at most every INTERVAL_S; every stream every SWEEP_S.

    A trim that fails (Redis away, a script refused) is logged and left to the next one: the
    event that triggered it is journaled already, and an untrimmed entry is only memory."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last: dict[str, float] = {}
        self._client: aioredis.Redis | None = None
        self._sweeping: asyncio.Task[None] | None = None
        self.trimmed = 0

    def _connection(self, settings: RuntimeSettings) -> aioredis.Redis:
        if self._client is None:
            import redis.asyncio as aioredis

            self._client = aioredis.Redis.from_url(settings.redis_url)
        return self._client

    async def after(self, settings: RuntimeSettings, schema: str, log: Any) -> None:
        """Called once the journal holds an event of `schema`: trim its stream unless trimmed lately."""
        self.keep_sweeping(settings, log)
        now = self._clock()
        if now - self._last.get(schema, -math.inf) < INTERVAL_S:
            return
        self._last[schema] = now
        await self._trim(settings, schema, log)

    async def sweep(self, settings: RuntimeSettings, log: Any) -> None:
        """Trim every catalogue stream once (after a reconcile pass: streams that went quiet)."""
        for schema in READERS:
            self._last[schema] = self._clock()
            await self._trim(settings, schema, log)

    def keep_sweeping(self, settings: RuntimeSettings, log: Any) -> None:
        """Sweep every SWEEP_S for as long as the service runs: from the first event or reconcile pass, whichever
        comes first (later calls do nothing)."""
        if self._sweeping is not None:
            return

        async def sweeping() -> None:
            while True:
                await asyncio.sleep(SWEEP_S)
                await self.sweep(settings, log)

        self._sweeping = asyncio.get_running_loop().create_task(sweeping())

    async def _trim(self, settings: RuntimeSettings, schema: str, log: Any) -> None:
        from redis.exceptions import RedisError

        try:
            self.trimmed += int(
                await self._connection(settings).eval(TRIM_SCRIPT, 1, *trim_arguments(settings, schema))
            )
        except RedisError as exc:
            log.warning("could not trim a stream; the next trim tries again", schema=schema, error=str(exc))
