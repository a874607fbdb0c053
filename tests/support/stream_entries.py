"""XRANGE's reply as the tests' Redis clients (no decode_responses) return it: redis-py's stubs type it loosely."""

from __future__ import annotations

from typing import cast

Entries = list[tuple[bytes, dict[bytes, bytes]]]


def entries(reply: object) -> Entries:
    """The (entry ID, fields) pairs of an XRANGE reply, typed as they arrive."""
    return cast(Entries, reply)
