"""Reading events back from the streams, for status, watch, approve and the DLQ.

A run's events are its journal (events.jsonl, in the bundle) and what the journal has not taken
yet (`untaken`): the entries of each stream its consumer group still has pending or has not been
delivered. Those are all a reader needs from Redis, and they are few however long the streams
are: status and approve cost the same with ten runs behind them or ten thousand, and the journal
may trim the streams (services/journal/trim.py)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, cast

import orjson
import redis.asyncio as aioredis
from redis.typing import KeyT, StreamIdT

from contracts.streams import JOURNAL, PROGRESS_SCHEMA, SCHEMAS, deadletter_stream, stream_name
from services.app.context import FIRST_RETRY_S, MAX_RETRY_S, Notice, say
from services.runtime.backoff import dropped, sleeps
from services.runtime.delivery.wire import decode_entry

# What XRANGE and XREAD return on a client without decode_responses (redis-py types them as Any).
_Entries = list[tuple[bytes, dict[bytes, bytes]]]
_Streams = list[tuple[bytes, _Entries]]


def _body(fields: dict[bytes, bytes]) -> tuple[dict[str, Any] | None, dict[str, str]]:
    body, headers = decode_entry(fields)
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None, headers
    return (data if isinstance(data, dict) else None), headers


async def scan(client: aioredis.Redis, stream: str, *, batch: int = 500,
               start: str = "-") -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """Every decodable entry of a stream from `start` on (an ID, "(ID" after it), oldest first."""
    while True:
        entries = cast(_Entries, await client.xrange(stream, min=start, max="+", count=batch))
        if not entries:
            return
        for entry_id, fields in entries:
            data, _ = _body(fields)
            if data is not None:
                yield entry_id.decode(), data
        last = entries[-1][0].decode()
        ms, seq = last.split("-")
        start = f"{ms}-{int(seq) + 1}"
        if len(entries) < batch:
            return


async def untaken(client: aioredis.Redis, prefix: str, run_id: str) -> list[dict[str, Any]]:
    """The run's events on the streams that the journal has not taken yet (it may be taking them now).

    Per stream, from the journal group's oldest pending entry, else after the last entry
    delivered to it; the whole stream where the journal has no group (it never ran, so nothing
    was journaled or trimmed). The journal acks an entry only once events.jsonl holds it, so
    everything before that point is in the bundle: read the bundle after this, and an event the
    journal takes in between is found in one or the other. One round trip for every stream's
    position, then one read per stream that has entries past it."""
    from redis.exceptions import ResponseError

    streams = [stream_name(prefix, schema) for schema in SCHEMAS]
    pipe = client.pipeline(transaction=False)
    for stream in streams:
        pipe.xinfo_groups(stream)
    starts: dict[str, str] = {}
    pending: list[str] = []
    for stream, groups in zip(streams, await pipe.execute(raise_on_error=False), strict=True):
        if isinstance(groups, ResponseError):
            continue  # no such stream: nothing of it to read
        journal = next((g for g in groups if g["name"] in (JOURNAL, JOURNAL.encode())), None)
        if journal is None:
            starts[stream] = "-"
        elif journal["pending"]:
            pending.append(stream)
        elif journal.get("lag") != 0:  # None: Redis cannot tell (7.0 after a deletion; before 7.0)
            starts[stream] = f"({_text(journal['last-delivered-id'])}"
    if pending:
        pipe = client.pipeline(transaction=False)
        for stream in pending:
            pipe.xpending(stream, JOURNAL)
        for stream, summary in zip(pending, await pipe.execute(), strict=True):
            starts[stream] = _text(summary["min"])
    found: dict[str, dict[str, Any]] = {}
    for stream, start in starts.items():
        async for _, data in scan(client, stream, start=start):
            if data.get("run_id") == run_id:
                found[str(data.get("event_id"))] = data
    return list(found.values())


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def dead_letters(client: aioredis.Redis, prefix: str) -> list[tuple[str, dict[str, Any]]]:
    return [item async for item in scan(client, deadletter_stream(prefix))]


async def follow(
    client: aioredis.Redis, prefix: str, *, from_start: bool, block_ms: int = 1000, notice: Notice = say,
    progress: bool = False,
) -> AsyncIterator[dict[str, Any] | None]:
    """Events of every stream as they arrive; yields None on each idle block (a tick).

    Redis going away (a restart, a failover, the network) does not end the follow: it
    says so in one line, retries with backoff (0.25 s doubling to 4 s), yielding a tick
    after each failed attempt so that the caller's own timeout still applies, and says
    in a second line when Redis answers again. It then reads on from the last entry
    it yielded of each stream (an emptied Redis's new entries carry later IDs).

    With `progress`, the step.progress stream too (contracts/progress.py: outside the catalogue, not
    journaled); its events are yielded like the others, their `schema` telling them apart."""
    schemas = (*SCHEMAS, PROGRESS_SCHEMA) if progress else SCHEMAS
    positions: dict[KeyT, StreamIdT] = {stream_name(prefix, schema): ("0-0" if from_start else "$")
                                        for schema in schemas}
    lost_at: float | None = None
    waits = sleeps(FIRST_RETRY_S, MAX_RETRY_S)
    resolved = from_start
    while True:
        try:
            if not resolved:
                # Resolve "$" to concrete IDs once, so events between two reads are not skipped.
                for stream in positions:
                    info = await client.xinfo_stream(stream) if await client.exists(stream) else None
                    positions[stream] = info["last-generated-id"].decode() if info else "0-0"
                resolved = True
            response = cast(_Streams | None, await client.xread(positions, block=block_ms, count=100))
        except BaseException as exc:
            if not dropped(exc):
                raise
            if lost_at is None:
                lost_at = time.monotonic()
                notice(f"lost Redis while following events ({type(exc).__name__}: {exc}); retrying with backoff")
            await anext(waits)
            yield None
            continue
        if lost_at is not None:
            notice(f"Redis answers again after {time.monotonic() - lost_at:.1f} s; following on")
            lost_at, waits = None, sleeps(FIRST_RETRY_S, MAX_RETRY_S)
        if not response:
            yield None
            continue
        batch = []
        for stream, entries in response:
            name = stream.decode()
            for entry_id, fields in entries:
                positions[name] = entry_id.decode()
                data, _ = _body(fields)
                if data is not None:
                    batch.append(data)
        for data in sorted(batch, key=lambda d: str(d.get("produced_at", ""))):
            yield data
