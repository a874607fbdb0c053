"""One stream entry as faststream wrote it (its binary format v1, or the older JSON envelope), read without
importing faststream.

The import would cost the commands that only read the streams most of their half-second budget
(docs/perf.md#bench_cli-how-long-a-command-takes-whole-process). faststream's reader stays the
reference: tests/unit/runtime/delivery/test_wire.py checks this one against it, so a format change fails there.
"""

from __future__ import annotations

import struct
from typing import Any

import orjson

IDENTITY = b"\x89BIN\r\n\x1a\n"
VERSION = 1
_PREFIX = struct.Struct(">HII")  # version, headers_start, data_start
_SHORT = struct.Struct(">H")


def parse_message(data: bytes) -> tuple[bytes, dict[str, str]]:
    """Body and headers of faststream's `__data__` field."""
    if data.startswith(IDENTITY) and len(data) >= len(IDENTITY) + _PREFIX.size:
        version, headers_start, data_start = _PREFIX.unpack_from(data, len(IDENTITY))
        if version == VERSION:
            try:
                return data[data_start:], _headers(data, headers_start)
            except (struct.error, UnicodeDecodeError):
                pass  # truncated or foreign: read as faststream's reader falls back, below
    return _legacy(data)


def _headers(data: bytes, offset: int) -> dict[str, str]:
    (count,) = _SHORT.unpack_from(data, offset)
    offset += _SHORT.size
    headers: dict[str, str] = {}
    for _ in range(count):
        pair = []
        for _ in range(2):
            (length,) = _SHORT.unpack_from(data, offset)
            offset += _SHORT.size
            if offset + length > len(data):
                raise struct.error("header runs past the entry")
            pair.append(data[offset:offset + length].decode())
            offset += length
        headers[pair[0]] = pair[1]
    return headers


def _legacy(data: bytes) -> tuple[bytes, dict[str, str]]:
    """faststream's JSON envelope, else the bytes themselves with no headers."""
    try:
        parsed: Any = orjson.loads(data)
        body, headers = parsed["data"], parsed.get("headers", {})
        return body.encode(), {str(k): str(v) for k, v in headers.items()}
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return data, {}


def decode_entry(fields: dict[bytes, bytes]) -> tuple[bytes, dict[str, str]]:
    """Body and headers of one raw stream entry as faststream wrote it."""
    data = fields.get(b"__data__")
    if data is None:
        # Not written by faststream (e.g. a plain XADD): the fields are the body.
        return orjson.dumps({k.decode(): v.decode("utf-8", "replace") for k, v in fields.items()}), {}
    return parse_message(data)
