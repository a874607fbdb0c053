"""A real HTTP(S) server on a free loopback port, served from a daemon thread, for tests.

The test supplies the request handler (what the far end does); this holds the
part every such server shares: binding, an optional TLS wrap, the thread, and
a shutdown that releases the port.
"""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer:
    """`handler` served at `url` (http://127.0.0.1:PORT/PATH, https:// with `tls`) until close()."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], path: str, *, tls: ssl.SSLContext | None = None) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}{path}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
