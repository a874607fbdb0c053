"""The SSE stream parser on its own (services.bench.loadgen.sse)."""

from __future__ import annotations

import orjson

from services.bench.loadgen.sse import StreamState


def chunk(text: str, cumulative: int) -> bytes:
    return (
        b"data: "
        + orjson.dumps({"choices": [{"index": 0, "text": text}], "usage": {"completion_tokens": cumulative}})
        + b"\n\n"
    )


def test_comments_fields_and_multiline_data():
    s = StreamState(chat=False)
    s.feed(b": ping\n\n", 1.0)
    s.feed(b"event: message\nid: 7\n" + chunk("ab", 2), 2.0)
    # A payload split over two data lines is joined with a newline (valid JSON whitespace).
    s.feed(b'data: {"choices": [{"index": 0, "text": "c"}],\ndata: "usage": {"completion_tokens": 5}}\n\n', 3.0)
    s.feed(b"data: [DONE]\n\n", 4.0)
    assert s.times == [2.0, 3.0] and s.counts == [2, 3]
    assert s.verdict() == (None, None) and s.output_tokens() == 5 and "".join(s.texts) == "abc"


def test_zero_token_chunk_is_no_arrival_and_stops_nothing():
    s = StreamState(chat=False)
    s.feed(chunk("a", 1) + chunk("", 1) + chunk("b", 2) + b"data: [DONE]\n\n", 1.0)
    assert s.times == [1.0, 1.0] and s.counts == [1, 1]


def test_parse_stops_at_the_first_error():
    s = StreamState(chat=False)
    s.feed(chunk("a", 1) + b"data: [1, 2]\n\n" + chunk("b", 2), 1.0)
    assert s.verdict() == ("stream", "a chunk is not a JSON object") and s.counts == [1]
