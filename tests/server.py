"""A real HTTP server on 127.0.0.1 for the tests: feeds, 304s, redirects, errors, slow and hostile bodies.

    server = LoopbackServer().start()
    server.route("/feed.xml", body=rss_bytes, etag='"v1"')
    server.route("/slow", body=b"...", drip=1.0)          # one byte a second
    server.route("/moved", status=301, headers={"Location": "/feed.xml"})
    url = server.url("/feed.xml"); server.hits["/feed.xml"]; server.times  # [(arrival, path), ...]

Each route is a Route; `handler=` takes the request handler for anything else. A path ending in
`*` (`server.route("/calendar/*", handler=...)`) answers every path under it that has no route of
its own. Nothing here leaves the loopback interface.
"""
from __future__ import annotations

import gzip
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/rss+xml"
    etag: str | None = None            # answer 304 to a matching If-None-Match
    last_modified: str | None = None   # answer 304 to an equal If-Modified-Since
    delay: float = 0.0                 # seconds before the status line
    drip: float | None = None          # seconds between single body bytes
    gzip: bool = False                 # send the body gzip-compressed
    precompressed: bool = False        # body is already gzip data (a bomb); send as such
    endless: bool = False              # stream zeros forever, no Content-Length
    hang: bool = False                 # accept, read the request, never answer
    handler: Callable[[BaseHTTPRequestHandler], None] | None = None


def reply(h: BaseHTTPRequestHandler, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
    """Answer a request in full: status, headers, Content-Length, body. For routes' own handlers too."""
    h.send_response(status)
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    if h.command != "HEAD" and status != 304:
        h.wfile.write(body)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """A client that hangs up mid-answer (a fetch cut at its deadline, a killed daemon) is what
        many tests do on purpose: no traceback for that; anything else is still printed."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class LoopbackServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.routes: dict[str, Route] = {}
        self.hits: dict[str, int] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.times: list[tuple[float, str]] = []  # (time.monotonic() on arrival, path), in order
        self.peers: list[tuple[str, int]] = []  # each request's client address: distinct ones = connections
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; with Nagle on, a kept-alive client waits for
            # the delayed ACK (40 ms) on every request.
            disable_nagle_algorithm = True

            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):  # noqa: N802
                server._serve(self)

            def do_HEAD(self):  # noqa: N802
                server._serve(self)

            def do_POST(self):  # noqa: N802 (a route's handler= reads the body: hub and API stubs)
                server._serve(self)

        self.httpd = _QuietServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]

    # -- set-up -------------------------------------------------------------------------------
    def start(self) -> LoopbackServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def route(self, path: str, **kwargs) -> Route:
        self.routes[path] = route = Route(**kwargs)
        return route

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    # -- serving ------------------------------------------------------------------------------
    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        path = urlsplit(h.path).path
        with self._lock:
            self.hits[path] = self.hits.get(path, 0) + 1
            self.requests.append((h.path, dict(h.headers.items())))
            self.times.append((time.monotonic(), path))
            self.peers.append(h.client_address[:2])
        route = self.routes.get(path)
        if route is None:
            route = next((r for p, r in list(self.routes.items()) if p.endswith("*") and path.startswith(p[:-1])), None)
        if route is None:
            return reply(h, 404, b"not found", {"Content-Type": "text/plain"})
        if route.hang:
            self._stopping.wait(600)
            return
        if route.delay:
            time.sleep(route.delay)
        if route.handler:
            return route.handler(h)
        if route.etag and h.headers.get("If-None-Match") == route.etag or \
                route.last_modified and h.headers.get("If-Modified-Since") == route.last_modified:
            return reply(h, 304, b"", self._validators(route))
        headers = {"Content-Type": route.content_type, **self._validators(route), **route.headers}
        body = route.body
        if route.gzip:
            body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
        if route.precompressed:
            headers["Content-Encoding"] = "gzip"
        if route.endless:
            return self._endless(h, route.status, headers)
        if route.drip is not None:
            return self._drip(h, route.status, body, headers, route.drip)
        reply(h, route.status, body, headers)

    @staticmethod
    def _validators(route: Route) -> dict[str, str]:
        out = {}
        if route.etag:
            out["ETag"] = route.etag
        if route.last_modified:
            out["Last-Modified"] = route.last_modified
        return out


    def _drip(self, h, status: int, body: bytes, headers: dict[str, str], pause: float) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        try:
            for i in range(len(body)):
                if self._stopping.is_set():
                    return
                h.wfile.write(body[i:i + 1])
                h.wfile.flush()
                time.sleep(pause)
        except OSError:
            pass

    def _endless(self, h, status: int, headers: dict[str, str]) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Connection", "close")
        h.end_headers()
        chunk = b"<" + b"x" * 65535
        try:
            while not self._stopping.is_set():
                h.wfile.write(chunk)
        except OSError:
            pass
        h.close_connection = True
