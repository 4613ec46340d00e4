"""The listener on WEBHOOK_LISTEN, and the webhook protocol: senders POST JSON at a source's `path`.

A delivery is taken only when its X-Hub-Signature-256 (`sha256=<hex>`, an HMAC-SHA256 of the body
with the secret in the source's `secret_env`) matches, compared in constant time; otherwise 401 and
a line in errors.log. A delivery id seen before (X-Hub-Delivery, or the source's `delivery_header`)
is answered 200 and not taken again. A body over MAX_BYTES gets 413. Accepted records are written
to the durable inbox (parser/inbox.py) before the 2xx answer; the main loop stages them.

WebSub callbacks (parser/websub.py) are served by the same listener at their own paths.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from . import logs
from .adapters import parse_body
from .errors import ParseError, SettingsError, StorageError
from .fetch import human_size
from .inbox import Inbox
from .record import now_iso

log = logging.getLogger("parser")
SIGNATURE_HEADER = "X-Hub-Signature-256"
MAX_DELIVERY_ID = 200
# After a 413 the rest of a body is read and thrown away (up to this much), so the sender reads
# our answer instead of a connection reset; past it the connection is simply closed.
DRAIN_LIMIT = 8 << 20


@dataclass
class Reply:
    status: int
    text: str = ""
    content_type: str = "text/plain; charset=utf-8"


class Endpoint(Protocol):
    methods: tuple[str, ...]
    url: str

    def handle(self, method: str, query: Mapping[str, list[str]], headers: Message, body: bytes,
               peer: str) -> Reply: ...

    def too_large(self, length: int, limit: int, peer: str) -> None: ...


def signature_matches(secret: bytes, body: bytes, header: str | None) -> bool:
    """`header` is 'sha256=<hex>' (or sha1/sha384/sha512 for WebSub hubs) over `body` with `secret`."""
    method, _, given = (header or "").strip().partition("=")
    method = method.strip().lower()
    if method not in ("sha1", "sha256", "sha384", "sha512") or not given:
        return False
    expected = hmac.new(secret, body, method).hexdigest().encode("ascii")
    return hmac.compare_digest(expected, given.strip().lower().encode("utf-8", "replace"))


def sign(secret: bytes, body: bytes, method: str = "sha256") -> str:
    """The signature header value a sender computes; used by the tests and benchmarks."""
    return f"{method}={hmac.new(secret, body, getattr(hashlib, method)).hexdigest()}"


class WebhookEndpoint:
    methods = ("POST",)

    def __init__(self, source: Any, inbox: Inbox, url: str, clock: Callable[[], float] = time.time):
        self.source = source
        self.inbox = inbox
        self.url = url
        self.clock = clock
        self.secret = source.push.secret()

    def too_large(self, length: int, limit: int, peer: str) -> None:
        logs.error_line(self.source.name, self.url, f"webhook delivery from {peer} refused (413): body of "
                        f"{human_size(length)} is over MAX_BYTES ({human_size(limit)})")

    def handle(self, method: str, query: Mapping[str, list[str]], headers: Message, body: bytes,
               peer: str) -> Reply:
        name, push = self.source.name, self.source.push
        signature = headers.get(SIGNATURE_HEADER)
        if not signature:
            return self._refuse(peer, f"no {SIGNATURE_HEADER} header")
        if not signature_matches(self.secret, body, signature) or not signature.lower().startswith("sha256="):
            return self._refuse(peer, f"{SIGNATURE_HEADER} does not match the body signed with the secret in "
                                f"{push.secret_env}")
        delivery = (headers.get(push.delivery_header) or "").strip()[:MAX_DELIVERY_ID] or None
        if delivery and self.inbox.seen(name, delivery):
            return self._repeated(delivery)
        try:
            payload = _payload(body, headers.get("Content-Type", ""))
            parsed = parse_body(self.source, payload, url=self.url, headers={"content-type": "application/json"},
                                fetched=now_iso(self.clock))
        except ParseError as exc:
            logs.error_line(name, self.url, f"webhook delivery {delivery or ''} from {peer} refused (400): {exc}")
            return Reply(400, f"{exc}\n")
        for warning in parsed.warnings:
            logs.error_line(name, self.url, warning)
        try:
            if not self.inbox.accept(name, delivery, parsed.records):
                return self._repeated(delivery)
        except StorageError as exc:
            logs.error_line(name, self.url, f"webhook delivery {delivery or ''} not kept (503): {exc}")
            return Reply(503, "cannot store the delivery now; retry later\n")
        log.info("%s  delivery %s: %d records received", name, delivery or "(no id)", len(parsed.records))
        return Reply(202, json.dumps({"accepted": len(parsed.records)}) + "\n", "application/json")

    def _refuse(self, peer: str, why: str) -> Reply:
        logs.error_line(self.source.name, self.url, f"webhook delivery from {peer} refused (401): {why}")
        return Reply(401, f"signature required: {why}\n")

    def _repeated(self, delivery: str | None) -> Reply:
        log.info("%s  delivery %s repeated: already received, not taken again", self.source.name, delivery)
        return Reply(200, "repeated delivery: already received\n")


def _payload(body: bytes, content_type: str) -> bytes:
    """The JSON of a delivery; form-encoded senders (GitHub's other option) put it in `payload`."""
    if content_type.split(";")[0].strip().lower() == "application/x-www-form-urlencoded":
        values = parse_qs(body.decode("utf-8", "replace")).get("payload")
        if not values:
            raise ParseError("form-encoded delivery without a payload field")
        return values[0].encode("utf-8")
    return body


class Listener:
    """A threaded HTTP server on WEBHOOK_LISTEN: one Endpoint per path, bodies capped at max_bytes."""

    def __init__(self, host: str, port: int, *, max_bytes: int, timeout: float):
        self.endpoints: dict[str, Endpoint] = {}
        self.max_bytes = max_bytes
        self._closers: list[Callable[[], None]] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "parser-listener"
            sys_version = ""

            def setup(self):
                self.timeout = timeout  # a socket timeout: a sender that stalls cannot hold a thread forever
                super().setup()
                # The answer goes out as headers, then body: without this, Nagle's algorithm holds the
                # body until the sender's delayed ACK (40 ms a delivery on a kept-alive connection).
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args):  # the deliveries that matter are logged by the endpoints
                pass

            def do_POST(self):  # noqa: N802 (http.server's name)
                listener._serve(self)

            def do_GET(self):  # noqa: N802
                listener._serve(self)

        try:
            self.httpd = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise SettingsError(f"WEBHOOK_LISTEN: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def add(self, path: str, endpoint: Endpoint) -> None:
        self.endpoints[path] = endpoint

    def on_close(self, closer: Callable[[], None]) -> None:
        self._closers.append(closer)

    def start(self) -> Listener:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="listener", daemon=True)
        self._thread.start()
        log.info("listening on %s for %s", self.base_url, ", ".join(sorted(self.endpoints)) or "nothing")
        return self

    def close(self) -> None:
        for closer in self._closers:
            closer()
        if self._thread is not None:
            self.httpd.shutdown()
        self.httpd.server_close()

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        endpoint = self.endpoints.get(parts.path)
        peer = h.client_address[0] if h.client_address else "?"
        if endpoint is None:
            return self._send(h, Reply(404, "no source listens at this path\n"), close=not _has_no_body(h))
        if h.command not in endpoint.methods:
            return self._send(h, Reply(405, f"use {' or '.join(endpoint.methods)}\n"), close=True)
        body = b""
        if h.command == "POST":
            if "chunked" in (h.headers.get("Transfer-Encoding") or "").lower():
                return self._send(h, Reply(411, "send a Content-Length\n"), close=True)
            length = (h.headers.get("Content-Length") or "").strip()
            if not length.isdigit():
                return self._send(h, Reply(411, "send a Content-Length\n"), close=True)
            size = int(length)
            if size > self.max_bytes:
                endpoint.too_large(size, self.max_bytes, peer)
                self._send(h, Reply(413, f"body over {human_size(self.max_bytes)}\n"), close=True)
                _discard(h, size)
                return None
            try:
                body = h.rfile.read(size)
            except OSError:
                body = b""
            if len(body) < size:  # the sender stalled or went away mid-body: nothing to answer
                h.close_connection = True
                return None
        try:
            reply = endpoint.handle(h.command, parse_qs(parts.query, keep_blank_values=True), h.headers, body, peer)
        except Exception as exc:  # a bug must not kill the listener; the sender retries on 5xx
            log.error("listener error at %s:\n%s", parts.path, traceback.format_exc())
            logs.error_line("listener", endpoint.url, f"internal error (500): {exc!r}")
            reply = Reply(500, "internal error\n")
        self._send(h, reply)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, reply: Reply, close: bool = False) -> None:
        data = reply.text.encode("utf-8")
        try:
            h.send_response(reply.status)
            h.send_header("Content-Type", reply.content_type)
            h.send_header("Content-Length", str(len(data)))
            if close:
                h.send_header("Connection", "close")
                h.close_connection = True
            h.end_headers()
            h.wfile.write(data)
            h.wfile.flush()
        except OSError:
            h.close_connection = True


def _has_no_body(h: BaseHTTPRequestHandler) -> bool:
    return (h.headers.get("Content-Length") or "0").strip() == "0"


def _discard(h: BaseHTTPRequestHandler, size: int) -> None:
    if size > DRAIN_LIMIT:
        return
    try:
        while size > 0:
            chunk = h.rfile.read(min(size, 65536))
            if not chunk:
                break
            size -= len(chunk)
    except OSError:
        pass


def open_listener(settings: Any, sources: list, inbox: Inbox, fetcher: Any, stop: threading.Event) -> Listener:
    """Start the listener for the webhook and websub sources; the WebSub subscriber starts with it."""
    from .websub import WebSub  # imported here: websub uses this module's signature check
    host, port = settings.webhook_listen
    listener = Listener(host, port, max_bytes=settings.max_bytes, timeout=settings.timeout)
    base = settings.websub_callback_base or listener.base_url
    for source in sources:
        if source.protocol == "webhook":
            listener.add(source.push.path, WebhookEndpoint(source, inbox, listener.base_url + source.push.path))
    websub_sources = [s for s in sources if s.protocol == "websub"]
    if websub_sources:
        websub = WebSub(websub_sources, fetcher=fetcher, inbox=inbox, callback_base=base, stop=stop)
        for path, endpoint in websub.endpoints().items():
            listener.add(path, endpoint)
        listener.on_close(websub.close)
        listener.start()
        websub.start()
        return listener
    return listener.start()
