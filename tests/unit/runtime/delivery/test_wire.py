"""services.runtime.delivery.wire reads stream entries exactly as faststream's own reader does.

faststream's encoder writes the entries here (the reference), so a change of its
binary format in an upgrade fails this test rather than every CLI read."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from faststream.redis.parser.binary import BinaryMessageFormatV1

from services.runtime.delivery.wire import decode_entry, parse_message


def encoded(body: bytes, headers: dict[str, str]) -> bytes:
    return asyncio.run(BinaryMessageFormatV1.encode(message=body, reply_to=None, headers=headers,
                                                    correlation_id="corr-1"))


@pytest.mark.parametrize(("body", "headers"), [
    (b'{"schema": "profile.requested", "run_id": "r-1"}', {"schema": "profile.requested", "version": "1"}),
    (b"", {}),
    ("{\"note\": \"d\u00e9j\u00e0 vu, \u6f22\u5b57\"}".encode(), {"content-type": "application/json"}),
    (b"x" * 70_000, {"k" * 300: "v" * 1000}),
])
def test_faststreams_entries_read_as_faststream_reads_them(body, headers):
    data = encoded(body, headers)
    ours = parse_message(data)
    theirs = BinaryMessageFormatV1.parse(data)
    assert ours == (theirs[0], {str(k): str(v) for k, v in theirs[1].items()})
    assert ours[0] == body and ours[1]["correlation_id"] == "corr-1"
    assert {k: ours[1][k] for k in headers} == headers


def test_the_older_json_envelope_and_foreign_bytes_read_as_faststream_reads_them():
    legacy = orjson.dumps({"data": '{"a": 1}', "headers": {"schema": "run.approved"}})
    assert parse_message(legacy) == (b'{"a": 1}', {"schema": "run.approved"}) == BinaryMessageFormatV1.parse(legacy)
    for foreign in (b"not json", b'{"no": "data key"}', b"\x89BIN\r\n\x1a\n\x00\x02" + b"\x00" * 8):
        assert parse_message(foreign) == (foreign, {}) == BinaryMessageFormatV1.parse(foreign)


def test_a_truncated_entry_is_its_bytes_not_a_crash():
    data = encoded(b"{}", {"schema": "gate.decided"})
    cut = data[:len(b"\x89BIN\r\n\x1a\n") + 12]  # the offsets survive, the headers do not
    assert parse_message(cut) == (cut, {})


def test_an_entry_not_written_by_faststream_is_its_fields():
    body, headers = decode_entry({b"schema": b"x", b"run_id": b"r-2"})
    assert orjson.loads(body) == {"schema": "x", "run_id": "r-2"} and headers == {}
    assert decode_entry({b"__data__": encoded(b"{}", {})})[0] == b"{}"
