"""The HTTP/1.1 client's response parser (services/bench/loadgen/http1.py), bytes fed straight to its protocol."""

from __future__ import annotations

import asyncio

import pytest

from services.bench.loadgen.http1 import Http1Pool, ProtocolError, _Connection


class Transport:
    """The little of asyncio.Transport the connection uses."""

    def __init__(self) -> None:
        self.written = b""
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True


class Times:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def connection() -> tuple[_Connection, Transport, Times]:
    times = Times()
    conn = _Connection(times)
    transport = Transport()
    conn.connection_made(transport)
    return conn, transport, times


def feed(conn: _Connection, times: Times, parts: list[tuple[float, bytes]]) -> None:
    for at, data in parts:
        times.now = at
        conn.data_received(data)


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


async def test_chunked_body_reaches_the_sink_with_each_reads_arrival_time():
    conn, transport, times = connection()
    got: list[tuple[bytes, float]] = []
    done = conn.begin(b"POST / HTTP/1.1\r\n\r\n", lambda data, now: got.append((data, now)) and False, 1000)
    assert transport.written == b"POST / HTTP/1.1\r\n\r\n"
    # A chunk split inside its size line, its data and its CRLF; two chunks in one read; trailers.
    feed(
        conn,
        times,
        [
            (1.0, CHUNKED_HEAD + b"5"),
            (2.0, b"\r\nhel"),
            (3.0, b"lo\r"),
            (4.0, b"\n3;ext=1\r\nabc\r\n2\r\nde\r\n"),
            (5.0, b"0\r\nx-trailer: 1\r\n\r\n"),
        ],
    )
    response = await done
    assert response.status == 200 and response.body == b""
    assert got == [(b"hel", 2.0), (b"lo", 3.0), (b"abcde", 4.0)]
    conn.end()
    assert not conn.closed and conn.reused  # kept alive for the next request


async def test_content_length_body_is_collected_and_non_200_never_reaches_the_sink():
    conn, _, times = connection()
    done = conn.begin(b"GET /metrics HTTP/1.1\r\n\r\n", lambda data, now: pytest.fail("sink called"), 1000)
    feed(
        conn,
        times,
        [
            (1.0, b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Service Unavailable\r\ncontent-length: 7\r\n\r\nbus"),
            (2.0, b"y!!"),
        ],
    )
    assert not done.done()
    feed(conn, times, [(3.0, b"!")])
    assert (await done).status == 503 and (await done).body == b"busy!!!"


async def test_body_to_the_end_of_the_connection_and_connection_close():
    conn, _, times = connection()
    done = conn.begin(b"GET / HTTP/1.1\r\n\r\n", None, 1000)
    feed(conn, times, [(1.0, b"HTTP/1.0 200 OK\r\n\r\nall of it")])
    conn.connection_lost(None)
    assert (await done).body == b"all of it" and conn.closed

    conn, transport, times = connection()
    done = conn.begin(b"GET / HTTP/1.1\r\n\r\n", None, 1000)
    feed(conn, times, [(1.0, b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok")])
    assert (await done).body == b"ok" and transport.closed  # the server said close: not reused


async def test_a_sink_that_stops_closes_the_connection():
    conn, transport, times = connection()
    done = conn.begin(b"POST / HTTP/1.1\r\n\r\n", lambda data, now: True, 1000)
    feed(conn, times, [(1.0, CHUNKED_HEAD + b"3\r\nbad\r\n")])
    assert (await done).status == 200 and transport.closed and conn.closed


@pytest.mark.parametrize("data", [
    b"SSH-2.0-OpenSSH\r\n\r\n",
    b"HTTP/1.1 abc OK\r\n\r\n",
    CHUNKED_HEAD + b"zz\r\n",
    b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\ntoo long",
    b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
])
async def test_malformed_responses_are_protocol_errors(data):
    conn, transport, times = connection()
    done = conn.begin(b"GET / HTTP/1.1\r\n\r\n", None, 1000)
    feed(conn, times, [(1.0, data)])
    with pytest.raises(ProtocolError):
        await done
    assert transport.closed


async def test_a_connection_lost_mid_response_is_a_protocol_error():
    conn, _, times = connection()
    done = conn.begin(b"POST / HTTP/1.1\r\n\r\n", lambda data, now: False, 1000)
    feed(conn, times, [(1.0, CHUNKED_HEAD + b"3\r\nabc\r\n")])
    conn.connection_lost(ConnectionResetError("reset"))
    with pytest.raises(ProtocolError, match="before the response ended"):
        await done


async def test_an_abandoned_exchange_closes_its_connection():
    conn, transport, times = connection()
    done = conn.begin(b"POST / HTTP/1.1\r\n\r\n", lambda data, now: False, 1000)
    feed(conn, times, [(1.0, CHUNKED_HEAD)])
    done.cancel()
    conn.end()  # what a timed-out request does
    assert transport.closed and conn.closed
    await asyncio.sleep(0)


def test_request_bytes_carry_host_prefix_and_length():
    pool = Http1Pool("http://example.test:8000/base/", connect_timeout_s=1.0)
    raw = pool.request_bytes("POST", "/v1/completions", b'{"a":1}', {"content-type": "application/json"})
    assert raw == (
        b"POST /base/v1/completions HTTP/1.1\r\nhost: example.test:8000\r\ncontent-type: application/json\r\n"
        b'content-length: 7\r\n\r\n{"a":1}'
    )
    assert Http1Pool("https://example.test", connect_timeout_s=1.0).request_bytes("GET", "/metrics", None) == (
        b"GET /metrics HTTP/1.1\r\nhost: example.test\r\n\r\n")
    with pytest.raises(ValueError):
        Http1Pool("example.test:80", connect_timeout_s=1.0)
