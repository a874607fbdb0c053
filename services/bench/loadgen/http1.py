"""A minimal HTTP/1.1 client on asyncio.Protocol: the load generator's transport.

The client's CPU per received chunk limits the measurement, and httpx costs too much of it
(docs/bench-loadgen.md#the-http-client-http1py). So each socket read is de-chunked in `data_received` and
handed, with the read's arrival time, straight to a sink (the SSE parser): no coroutine is woken per chunk,
and the arrival time is taken before any parsing."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from services.bench.errors import BenchError

# A sink receives body bytes and the time their read arrived; True stops the response
# (its connection is then closed, since the rest of the body is unread).
Sink = Callable[[bytes, float], bool]
Clock = Callable[[], float]
MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024
_WANT_SIZE, _WANT_CRLF, _WANT_TRAILER = -1, -2, -3


class HttpError(BenchError):
    """Root of the HTTP client's errors."""


class ConnectError(HttpError):
    """The server could not be connected to."""


class ConnectTimeout(HttpError):
    """No connection within the connect timeout."""


class ProtocolError(HttpError):
    """The response is malformed, or the connection ended before it did."""


@dataclass
class Response:
    """Status and, unless streamed into a sink, the body."""

    status: int
    body: bytes


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one exchange at a time."""

    # Set per exchange by begin(); declared here for the callbacks that read them.
    _buf: bytes
    _head_done: bool
    _framing: str

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reused = False  # served a response before: the server may have closed it meanwhile
        self._done: asyncio.Future[Response] | None = None

    # ---- asyncio callbacks

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.transport = None
        done = self._done
        if done is None or done.done():
            return
        if self._head_done and self._framing == "close":
            self._finish()  # a body framed by the connection's end: that end completes it
            return
        why = f": {exc}" if exc else ""
        self._over = True
        done.set_exception(ProtocolError(f"the server closed the connection before the response ended{why}"))

    def data_received(self, data: bytes) -> None:
        now = self._clock()
        if self._done is None or self._done.done():
            self.close()  # bytes nobody asked for: the connection's state is unknown
            return
        self.got_bytes = True
        try:
            if not self._head_done:
                self._buf += data
                if not self._parse_head():
                    return
                data, self._buf = self._buf, b""
                if not data and not self._complete():
                    return
            if data:
                self._body(data, now)
        except ProtocolError as err:
            self.close()
            self._over = True
            if not self._done.done():
                self._done.set_exception(err)

    # ---- one exchange

    def begin(self, request: bytes, sink: Sink | None, max_body: int) -> asyncio.Future[Response]:
        assert self.transport is not None and self._done is None
        self._done = asyncio.get_running_loop().create_future()
        self._sink, self._max_body = sink, max_body
        self._buf = b""
        self._head_done = False
        self._status = 0
        self._framing = "close"
        self._left = 0
        self._keep = True
        self._collected: list[bytes] = []
        self._collected_bytes = 0
        self.got_bytes = False
        self._over = False  # the response ended or failed (a cancelled future is done, not over)
        self.transport.write(request)
        return self._done

    def end(self) -> None:
        """After the exchange's future resolved (or the caller gave up on it)."""
        if self._done is not None and not self._over:
            self.close()  # abandoned mid-response (cancelled, timed out): its state is unknown
        self._done = None
        self.reused = True

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _parse_head(self) -> bool:
        """True once a final (non-1xx) head is parsed; its body bytes stay in self._buf."""
        while True:
            cut = self._buf.find(b"\r\n\r\n")
            if cut < 0:
                if len(self._buf) > MAX_HEAD_BYTES:
                    raise ProtocolError(f"the response head exceeds {MAX_HEAD_BYTES} bytes")
                return False
            lines = self._buf[:cut].split(b"\r\n")
            self._buf = self._buf[cut + 4 :]
            parts = lines[0].split(b" ", 2)
            try:
                version, status = parts[0], int(parts[1])
            except (IndexError, ValueError):
                raise ProtocolError(f"not an HTTP status line: {lines[0][:100]!r}") from None
            if not version.startswith(b"HTTP/1."):
                raise ProtocolError(f"not an HTTP/1.x response: {lines[0][:100]!r}")
            if 100 <= status < 200:
                continue  # 100 Continue and other interim responses: the final one follows
            headers: dict[bytes, bytes] = {}
            for line in lines[1:]:
                name, sep, value = line.partition(b":")
                if not sep:
                    raise ProtocolError(f"malformed header line: {line[:100]!r}")
                headers[name.strip().lower()] = value.strip()
            self._status = status
            self._keep = version == b"HTTP/1.1" and b"close" not in headers.get(b"connection", b"").lower()
            if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
                self._framing, self._left = "chunked", _WANT_SIZE
            elif status in (204, 304):
                self._framing, self._left = "length", 0
            elif b"content-length" in headers:
                try:
                    self._framing, self._left = "length", int(headers[b"content-length"])
                except ValueError:
                    raise ProtocolError(f"bad content-length {headers[b'content-length'][:40]!r}") from None
            else:
                self._framing, self._keep = "close", False
            self._head_done = True
            return True

    def _complete(self) -> bool:
        """Finish a body of known length 0; True when the exchange is not yet over."""
        if self._framing == "length" and self._left == 0:
            self._finish()
            return False
        return True

    def _body(self, data: bytes, now: float) -> None:
        if self._framing == "chunked":
            payload, finished = self._dechunk(data)
        elif self._framing == "length":
            if len(data) > self._left:
                raise ProtocolError("the server sent more bytes than its content-length")
            self._left -= len(data)
            payload, finished = data, self._left == 0
        else:
            payload, finished = data, False
        if payload:
            if self._sink is not None and self._status == 200:
                if self._sink(payload, now):
                    self._keep = False  # stopped mid-body: the rest is unread
                    self._finish()
                    return
            else:
                self._collected.append(payload)
                self._collected_bytes += len(payload)
                if self._collected_bytes > self._max_body:
                    self._keep = False
                    self._finish()
                    return
        if finished:
            self._finish()

    def _dechunk(self, data: bytes) -> tuple[bytes, bool]:
        """The chunk data in `data` (plus what an earlier read left), and whether the last chunk ended."""
        buf = self._buf + data if self._buf else data
        out: list[bytes] = []
        pos, size = 0, len(buf)
        finished = False
        while pos < size:
            left = self._left
            if left > 0:
                take = min(left, size - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self._left = left - take if left > take else _WANT_CRLF
            elif left == _WANT_CRLF:
                if size - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise ProtocolError("a chunk is not followed by CRLF")
                pos += 2
                self._left = _WANT_SIZE
            else:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    if size - pos > 1024:
                        raise ProtocolError("a chunk-size line exceeds 1024 bytes")
                    break
                line = buf[pos:eol]
                pos = eol + 2
                if left == _WANT_TRAILER:
                    if not line:
                        finished = True  # the blank line after the last chunk (and any trailers)
                        break
                    continue
                try:
                    n = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise ProtocolError(f"bad chunk size {line[:40]!r}") from None
                self._left = n if n > 0 else _WANT_TRAILER
        self._buf = buf[pos:] if pos < size else b""
        if finished and self._buf:
            raise ProtocolError("bytes after the end of a chunked response")
        return (out[0] if len(out) == 1 else b"".join(out)), finished

    def _finish(self) -> None:
        self._over = True
        if not self._keep:
            self.close()
        if self._done is not None and not self._done.done():
            self._done.set_result(Response(self._status, b"".join(self._collected)))


class Http1Pool:
    """Keep-alive connections to one server, reused last-in first-out.

    It holds as many connections as requests are in flight: the caller (a
    semaphore) caps concurrency, never the pool, so no request waits here.
    """

    def __init__(self, base_url: str, *, connect_timeout_s: float, clock: Clock = time.monotonic,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self._host = url.hostname
        self._tls = url.scheme == "https"
        self._port = url.port or (443 if self._tls else 80)
        self._prefix = url.path.rstrip("/")
        default_port = self._port == (443 if self._tls else 80)
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._host_header = (host if default_port else f"{host}:{self._port}").encode()
        self._ssl = (ssl_context or ssl.create_default_context()) if self._tls else None
        self._connect_timeout_s = connect_timeout_s
        self._clock = clock
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()

    def request_bytes(self, method: str, path: str, body: bytes | None, headers: dict[str, str] | None = None) -> bytes:
        """The request's bytes, built once (a window builds its requests before its clock starts)."""
        lines = [b"%s %s HTTP/1.1" % (method.encode(), (self._prefix + path).encode()), b"host: " + self._host_header]
        lines += [f"{name}: {value}".encode() for name, value in (headers or {}).items()]
        if body is not None:
            lines.append(b"content-length: %d" % len(body))
        return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")

    async def send(self, request: bytes, sink: Sink | None = None, *, max_body: int = MAX_BODY_BYTES) -> Response:
        """Send prepared request bytes; a 200's body goes to `sink` when given, any other is collected."""
        conn = await self._take()
        try:
            try:
                return await self._exchange(conn, request, sink, max_body)
            except ProtocolError:
                if not (conn.reused and conn.closed and not conn.got_bytes):
                    raise
            # A kept-alive connection the server had closed before reading the request: the
            # request never reached it, so it goes once more on a fresh connection.
            self._drop(conn)
            conn = await self._connect()
            return await self._exchange(conn, request, sink, max_body)
        finally:
            self._give(conn)

    async def _exchange(self, conn: _Connection, request: bytes, sink: Sink | None, max_body: int) -> Response:
        try:
            return await conn.begin(request, sink, max_body)
        finally:
            conn.end()

    async def _take(self) -> _Connection:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
            self._all.discard(conn)
        return await self._connect()

    def _give(self, conn: _Connection) -> None:
        if conn.closed:
            self._drop(conn)
        else:
            self._idle.append(conn)

    def _drop(self, conn: _Connection) -> None:
        conn.close()
        self._all.discard(conn)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                _, conn = await loop.create_connection(
                    lambda: _Connection(self._clock), self._host, self._port, ssl=self._ssl,
                    server_hostname=self._host if self._tls else None)
        except TimeoutError:
            raise ConnectTimeout(
                f"no connection to {self._host}:{self._port} within {self._connect_timeout_s} s"
            ) from None
        except OSError as err:  # refused, unreachable, TLS handshake failure (ssl.SSLError is an OSError)
            raise ConnectError(f"{type(err).__name__}: {err}") from None
        self._all.add(conn)
        return conn

    async def aclose(self) -> None:
        for conn in list(self._all):
            conn.close()
        self._all.clear()
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports run their close callbacks
