"""A real HTTP(S) server on a free loopback port, served from a daemon thread, for tests.

The test supplies the request handler (what the far end does); this holds the
part every such server shares: binding, an optional TLS wrap, the thread, and
a shutdown that releases the port. `connections` counts every connection the
listener accepted, a failed TLS handshake included: a test that must prove
nothing reached the server reads it, not only the requests its handler saw.
"""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _CountingServer(ThreadingHTTPServer):
    connections = 0

    def get_request(self) -> tuple[Any, Any]:
        # Called only when the listening socket is readable, so each call is one accepted (or attempted) connection;
        # with TLS the handshake runs inside accept() and may raise: the connection still counts.
        try:
            return super().get_request()
        finally:
            self.connections += 1


class LoopbackServer:
    """`handler` served at `url` (http://127.0.0.1:PORT/PATH, https:// with `tls`) until close()."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], path: str, *, tls: ssl.SSLContext | None = None) -> None:
        self.server = _CountingServer(("127.0.0.1", 0), handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.port = self.server.server_address[1]
        self.url = f"{scheme}://127.0.0.1:{self.port}{path}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def connections(self) -> int:
        return self.server.connections

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
