"""A run's `events.jsonl`: append-only, one JSON object per line, deduplicated by event_id.

The journal is its only writer, but it scales out and deliveries are at-least-once, so appends hold an
exclusive flock: a line is appended only if no complete line carries its event_id, always whole. A line
a dying writer tore is cut by the next one and kept aside (docs/delivery.md#torn-journal-lines).
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from contracts.envelope import utc_now
from contracts.layout import EVENTS_TORN
from services.runtime import failpoints
from services.runtime.bundle.bundle_paths import InvalidContent

_CHUNK_BYTES = 1 << 20
# An event's ID near the start of its line (the envelope's fourth field): a torn line long enough names it.
_NAMED_ID = re.compile(rb'"event_id"\s*:\s*"([^"\\]{1,64})"')


def event_line(event_id: object, line: object) -> bytes:
    """Check that `line` is one compact JSON object whose event_id is `event_id`; return it with '\\n'.

    The event_id must be inside the line: it is how the seen-set is rebuilt
    from the file after a restart.
    """
    if not isinstance(event_id, str) or not event_id:
        raise InvalidContent(f"invalid event_id {event_id!r}: give the event's non-empty event_id")
    if not isinstance(line, (bytes, bytearray, memoryview)):
        raise InvalidContent(f"an event line is bytes (the event's JSON), not {type(line).__name__}")
    body = bytes(line)
    if body.endswith(b"\n"):
        body = body[:-1]
    if b"\n" in body or b"\r" in body:
        raise InvalidContent(f"event {event_id} is not one line: serialise it compactly (no newlines)")
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise InvalidContent(f"event {event_id} is not valid JSON: {err}") from err
    if not isinstance(obj, dict) or obj.get("event_id") != event_id:
        raise InvalidContent(f"event line must be a JSON object whose event_id is {event_id!r}")
    return body + b"\n"


def _event_id_of(raw: bytes) -> str | None:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    event_id = obj.get("event_id") if isinstance(obj, dict) else None
    return event_id if isinstance(event_id, str) else None


def _named_id(raw: bytes) -> str | None:
    """The event ID a torn line names, when it got that far; None otherwise."""
    found = _NAMED_ID.search(raw)
    return found.group(1).decode("utf-8", "replace") if found else None


def torn_path(events: Path) -> Path:
    return events.with_name(EVENTS_TORN)


def _keep_aside(events: Path, at_byte: int, raw: bytes, *, fsync: bool) -> None:
    """Append one torn line to the side file, with where it was and the event it names (if any)."""
    record = orjson.dumps({"at_byte": at_byte, "event_id": _named_id(raw), "kept_at": utc_now().isoformat(),
                           "fragment": raw.decode("utf-8", "replace")}) + b"\n"
    fd = os.open(torn_path(events), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    try:
        _write_all(fd, record)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class EventLog:
    """The events file of one run, with the set of event_ids it already holds.

    The set is loaded lazily and then kept current incrementally: under the
    lock, each append first reads whatever other writers appended since this
    instance last looked (from `_offset` to EOF).
    """

    def __init__(self, path: Path, *, fsync: bool) -> None:
        self.path = path
        self._fsync = fsync
        self._seen: set[str] = set()
        self._offset = 0  # bytes of the file already folded into _seen; always at a line start
        self._lock = threading.Lock()  # threads of this process; flock covers other processes

    def append(self, event_id: str, line: bytes) -> bool:
        payload = event_line(event_id, line)
        # ids are never removed from the file, so a hit without the lock is final.
        if event_id in self._seen:
            return False
        with self._lock:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # released by close
                created = self._catch_up(fd)
                if event_id in self._seen:
                    return False
                failpoints.hit("journal.torn-append", before=lambda: _write_all(fd, payload[: len(payload) // 2]))
                _write_all(fd, payload)
                if self._fsync:
                    os.fsync(fd)
                self._offset += len(payload)
                self._seen.add(event_id)
            finally:
                os.close(fd)
            if created and self._fsync:
                fsync_dir(self.path.parent)
            return True

    def _catch_up(self, fd: int) -> bool:
        """Fold lines appended by others into _seen; terminate a torn tail. True if the file was empty."""
        size = os.fstat(fd).st_size
        if size < self._offset:
            # Shrunk: someone truncated an append-only file. Start over rather than trust stale state.
            self._seen.clear()
            self._offset = 0
        pending = b""
        pos = self._offset
        while pos < size:
            chunk = os.pread(fd, min(_CHUNK_BYTES, size - pos), pos)
            if not chunk:
                break
            pos += len(chunk)
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                event_id = _event_id_of(raw)
                if event_id is not None:
                    self._seen.add(event_id)
        self._offset = pos - len(pending)
        if pending:
            # We hold the exclusive lock, so no live writer owns this tail: a writer died mid-line.
            event_id = _event_id_of(pending)
            if event_id is not None:
                # A whole JSON object, only its '\n' lost: an event. End it so our line starts on its own.
                _write_all(fd, b"\n")
                self._offset = size + 1
                self._seen.add(event_id)
            else:
                # Torn: kept aside, then cut, so the file holds whole lines only. No other writer
                # folded past its start (it has no '\n'), so no one's offset points beyond the cut.
                _keep_aside(self.path, self._offset, pending, fsync=self._fsync)
                os.ftruncate(fd, self._offset)
                if self._fsync:
                    os.fsync(fd)
        return size == 0


@dataclass
class EventScan:
    """The parsed events of a run, and the 1-based numbers of lines that are not JSON objects."""

    events: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: list[int] = field(default_factory=list)
    # Event IDs a torn line names (left in the file, or kept aside) that no whole line holds, first seen first.
    missing: list[str] = field(default_factory=list)


def scan_events(path: Path) -> EventScan:
    """Read events.jsonl under a shared lock; a missing file is an empty journal."""
    scan = EventScan()
    try:
        fh = open(path, "rb")  # closed below; the lock lives as long as the handle
    except FileNotFoundError:
        return scan
    with fh:
        # Shared lock: no append is half-done while we read, so an unterminated
        # last line is a torn one (read as JSON if it is whole, else counted bad).
        fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
        named = []
        for number, raw in enumerate(fh, start=1):
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                scan.bad_lines.append(number)
                named.append(_named_id(raw))
                continue
            if isinstance(obj, dict):
                scan.events.append(obj)
            else:
                scan.bad_lines.append(number)
        named += _kept_aside(torn_path(path))
    held = {e.get("event_id") for e in scan.events}
    scan.missing = list(dict.fromkeys(i for i in named if i is not None and i not in held))
    return scan


def _kept_aside(path: Path) -> list[str | None]:
    """The event IDs named by the torn lines kept aside (read under the events file's lock)."""
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return []
    named = []
    for line in lines:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a line of the side file itself torn by a crash: it names nothing to trust
        if isinstance(record, dict) and isinstance(record.get("event_id"), str):
            named.append(record["event_id"])
    return named


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
