"""The HTTP listener on WEBHOOK_LISTEN that webhook deliveries and WebSub callbacks share: one Endpoint
per path, and every limit a sender on the open network must not get past.

Why asyncio and not a thread per connection: a connection that dribbles its request costs a file
descriptor and a small buffer here, never a thread. One event-loop thread reads request heads and
bodies; only a request read whole goes to a small pool of worker threads, which runs the endpoint
(signature check, parse, fsync to the inbox). The limits, all enforced where the bytes come in:

- at most `connection_cap()` connections (256 at the usual 1,024 open files; RESERVED_FDS stay free
  for the main loop); past it the connection that has waited longest for its
  request head is closed to make room, or, when every connection is busy, the new one is answered
  503 and closed, so an attacker can neither exhaust the descriptors nor lock out honest senders (a
  connection dribbling a body is closed the same way);
- the request head (request line and headers) must arrive whole within HEAD_TIMEOUT, at most
  MAX_HEAD bytes and MAX_HEADERS lines; a body within BODY_TIMEOUT plus a second per BODY_RATE
  bytes; the answer is written within WRITE_TIMEOUT;
- a malformed request line or header (a Content-Length that is not plain ASCII digits, two that
  disagree, Transfer-Encoding with Content-Length, obsolete line folding) gets 400, never an
  exception;
- bodies over MAX_BYTES get 413 before a byte of them is read; bodies up to SMALL_BODY are always
  read (their memory is bounded by the connection cap); a larger body must first reserve its size in
  a budget shared by all connections (`body_budget()`, 64 MiB with the default MAX_BYTES), else 503
  with Retry-After: 100 connections holding 10 MiB bodies cannot take the daemon's memory with them;
- an endpoint may refuse from the headers alone (`precheck`, e.g. no signature) before the body is
  read.

Refusals are written to errors.log through RefusalLog: the first five at once, then one line a minute
per source with a count while they go on, so a flood of forged deliveries cannot rotate the error history
out of errors.log.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import http.client
import itertools
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.message import Message
from http import HTTPStatus
from typing import Protocol
from urllib.parse import parse_qs, urlsplit

from ..core import logs
from ..core.errors import SettingsError
from ..fetch.http import human_size

log = logging.getLogger("parser")

MiB = 1 << 20
MAX_CONNECTIONS = 256      # at most, whatever the open-file limit allows
RESERVED_FDS = 256         # left to the main loop: staging, hash and log files, database, fetches
WORKERS = 8                # threads running endpoints (HMAC, parse, fsync); the rest of the work is async
BACKLOG = 64               # asyncio's accept burst: connections accepted at one loop turn (connection_cap)
# Connections the kernel completes and holds until we accept them. Past its listen queue Linux answers
# new connections with SYN cookies, and one whose handshake and first segment were dropped there
# while the queue stayed full is reset when its next segment comes (TcpExtSyncookiesFailed): a signed
# delivery sent as head and body in two segments was lost that way under test_listener_abuse's flood.
# A queued connection costs kernel memory, not one of our descriptors. The kernel caps it at somaxconn.
LISTEN_QUEUE = 1024
HEAD_TIMEOUT = 10.0        # seconds for a whole request head, also the keep-alive idle time
BODY_TIMEOUT = 10.0        # seconds for a body, plus one second per BODY_RATE bytes
BODY_RATE = 100 * 1024
WRITE_TIMEOUT = 10.0
MAX_HEAD = 16 * 1024
MAX_HEADERS = 100
SMALL_BODY = 64 * 1024     # read without drawing on the budget
MIN_BUDGET = 64 * MiB
DRAIN_LIMIT = 8 * MiB      # after a refusal, this much of the body is read and dropped, so the sender
DRAIN_TIME = 5.0           # reads our answer instead of a connection reset
RETRY_AFTER = 5            # seconds, in a 503 for a spent budget or a full house
SUMMARY_WINDOW = 60.0      # errors.log: one line per source per this many seconds while refusals go on,
VERBATIM_LINES = 5         # after this many written as they came
MAX_JSON_DEPTH = 200       # deeper JSON is refused with 400 before it is parsed

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_LINE = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*")
_DIGITS = re.compile(r"[0-9]{1,18}")


@dataclass
class Reply:
    status: int
    text: str = ""
    content_type: str = "text/plain; charset=utf-8"


class Endpoint(Protocol):
    """What the listener serves at one path. `handle` runs on a worker thread with the whole body;
    `precheck` on the event loop before the body is read (None: go on reading)."""
    methods: tuple[str, ...]
    name: str   # the source, for errors.log
    url: str

    def precheck(self, method: str, headers: Message, peer: str) -> Reply | None: ...

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


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when the JSON in `body` nests arrays and objects deeper than `limit`.

    Python's json module recurses once per level (RecursionError near 1,000), and so do the walks
    over the parsed document: a body nested 100,000 deep must be refused before it is parsed. The
    scan runs at C speed: strings are cut out, the brackets left are summed."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False  # fewer openers than the limit cannot nest deeper than it
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0) > limit


def connection_cap(limit: int = MAX_CONNECTIONS) -> int:
    """Connections the listener may hold: the descriptors left after RESERVED_FDS and after four
    accept bursts of BACKLOG (asyncio counts a connection in our code three loop turns after it
    accepted it, and one closed to make room is closed a turn later), at most `limit`."""
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, ValueError, OSError):
        return limit
    if soft == getattr(resource, "RLIM_INFINITY", -1):
        return limit
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:
        in_use = 64
    return max(4, min(limit, soft - in_use - RESERVED_FDS - 4 * BACKLOG))


def body_budget(max_bytes: int) -> int:
    """Bytes of large bodies held at once, over all connections: room for a few at MAX_BYTES."""
    return max(MIN_BUDGET, 2 * max_bytes)


@dataclass
class _Window:
    started: float
    url: str
    written: int = 0  # lines written as they came in this window
    last: str = ""
    counts: dict[str, int] = field(default_factory=dict)


class RefusalLog:
    """errors.log lines about refused requests: a few as they come, then one line a minute per source.

    In a source's window of `window` seconds the first `verbatim` refusals are written at once; the
    ones after them are counted, and when the window ends one line gives the count by status and the
    last description. While refusals go on, that is one line a minute; once a window passes without
    any, the next are written at once again. Thread-safe: endpoints note from worker threads."""

    def __init__(self, window: float = SUMMARY_WINDOW, verbatim: int = VERBATIM_LINES,
                 clock: Callable[[], float] = time.monotonic):
        self.window = window
        self.verbatim = verbatim
        self.clock = clock
        self._lock = threading.Lock()
        self._windows: dict[str, _Window] = {}

    def note(self, source: str, url: str, status: str, description: str) -> None:
        with self._lock:
            window = self._windows.setdefault(source, _Window(started=self.clock(), url=url))
            if window.written >= self.verbatim:
                window.counts[status] = window.counts.get(status, 0) + 1
                window.last, window.url = description, url
                return
            window.written += 1
        logs.error_line(source, url, description)

    def flush(self, force: bool = False) -> None:
        """Write the summary of every window that has ended (all of them when `force`)."""
        now = self.clock()
        lines = []
        with self._lock:
            for source, window in list(self._windows.items()):
                if not force and now - window.started < self.window:
                    continue
                del self._windows[source]
                if window.counts:
                    lines.append((source, window.url, _summary(window, now)))
                    if not force:  # still going on: the next refusals are counted, not written
                        self._windows[source] = _Window(started=now, url=window.url, written=self.verbatim)
        for source, url, text in lines:
            logs.error_line(source, url, text)


def _summary(window: _Window, now: float) -> str:
    total = sum(window.counts.values())
    by_status = ", ".join(f"{status}: {count:,}" for status, count in sorted(window.counts.items()))
    return (f"{total:,} more requests refused in the last {now - window.started:.0f} s ({by_status}); "
            f"the last: {window.last}")


class RequestHeadError(Exception):
    def __init__(self, status: int, why: str):
        super().__init__(why)
        self.status = status


@dataclass
class Request:
    method: str
    target: str
    headers: Message
    length: int
    keep_alive: bool
    expect_continue: bool


def parse_head(head: bytes) -> Request:
    """The request line and headers (without the final blank line's CRLF) or RequestHeadError."""
    lines = head.decode("latin-1").split("\r\n")
    while lines and lines[-1] == "":
        lines.pop()
    parts = lines[0].split(" ") if lines else []
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not parts[1] or \
            parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
        raise RequestHeadError(400, "malformed request line")
    if len(lines) - 1 > MAX_HEADERS:
        raise RequestHeadError(431, f"more than {MAX_HEADERS} header lines")
    headers = http.client.HTTPMessage()
    for line in lines[1:]:
        match = _HEADER_LINE.fullmatch(line)
        if match is None or any(c in line for c in "\0\n\r"):
            raise RequestHeadError(400, "malformed header line")  # obsolete folding, no colon, control bytes
        headers[match.group(1)] = match.group(2)
    length = _content_length(headers)
    if headers.get_all("Transfer-Encoding"):
        if length is not None:
            raise RequestHeadError(400, "both Transfer-Encoding and Content-Length")
        raise RequestHeadError(411, "send a Content-Length (chunked bodies are not taken)")
    connection = {t.strip().lower() for v in headers.get_all("Connection") or [] for t in v.split(",")}
    keep_alive = "keep-alive" in connection if parts[2] == "HTTP/1.0" else "close" not in connection
    expect = (headers.get("Expect") or "").strip().lower()
    if expect and expect != "100-continue":
        raise RequestHeadError(417, "only Expect: 100-continue is understood")
    if length is None and parts[0] == "POST":
        raise RequestHeadError(411, "send a Content-Length")
    return Request(parts[0], parts[1], headers, length or 0, keep_alive, expect == "100-continue")


def _content_length(headers: Message) -> int | None:
    values = [v.strip() for raw in headers.get_all("Content-Length") or [] for v in raw.split(",")]
    if not values:
        return None
    if not all(_DIGITS.fullmatch(v) for v in values):
        raise RequestHeadError(400, "Content-Length is not a number of bytes")
    if len({int(v) for v in values}) > 1:
        raise RequestHeadError(400, "Content-Length values disagree")
    return int(values[0])


@dataclass(eq=False)
class _Connection:
    writer: asyncio.StreamWriter
    peer: str
    # Since when this connection waits for bytes, the oldest being closed first to make room: the
    # start of the wait for a request head or for a body (None: a request is being handled).
    evictable_since: float | None = field(default_factory=time.monotonic)
    served: int = 0  # requests whose head was read


class Listener:
    """The shared listener: `add` endpoints, `start`, `close`. See the module's docstring."""

    def __init__(self, host: str, port: int, *, max_bytes: int, max_connections: int | None = None):
        self.endpoints: dict[str, Endpoint] = {}
        self.max_bytes = max_bytes
        self.cap = max_connections or connection_cap()
        self.budget = body_budget(max_bytes)
        self.refusals = RefusalLog()
        self._held = 0  # bytes of large bodies reserved now (event-loop thread only)
        self._connections: set[_Connection] = set()
        self._closers: list[Callable[[], None]] = []
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="listener")
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        try:
            self._server = self._loop.run_until_complete(asyncio.start_server(
                self._connection, host, port, limit=MAX_HEAD, backlog=BACKLOG, reuse_address=True))
        except OSError as exc:
            self._loop.close()
            raise SettingsError(f"WEBHOOK_LISTEN: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        for listening in self._server.sockets:
            # asyncio listened with BACKLOG, its accept burst too; the kernel's queue is made longer
            # on the same socket, through a second descriptor of it (closed at once).
            with socket.socket(fileno=os.dup(listening.fileno())) as same:
                same.listen(LISTEN_QUEUE)
        self.host, self.port = self._server.sockets[0].getsockname()[:2]

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def add(self, path: str, endpoint: Endpoint) -> None:
        self.endpoints[path] = endpoint

    def on_close(self, closer: Callable[[], None]) -> None:
        self._closers.append(closer)

    def start(self) -> Listener:
        self._loop.create_task(self._every_second())
        self._thread = threading.Thread(target=self._loop.run_forever, name="listener", daemon=True)
        self._thread.start()
        log.info("listening on %s for %s (at most %d connections, %s of large bodies at once)", self.base_url,
                 ", ".join(sorted(self.endpoints)) or "nothing", self.cap, human_size(self.budget))
        return self

    def close(self) -> None:
        for closer in self._closers:
            closer()
        if self._thread is not None:
            future = asyncio.run_coroutine_threadsafe(self._shut(), self._loop)
            try:
                future.result(timeout=5)
            except Exception:  # noqa: BLE001 (closing anyway)
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        else:
            self._server.close()
        if not self._loop.is_running():
            self._loop.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.refusals.flush(force=True)

    async def _shut(self) -> None:
        self._server.close()
        for connection in list(self._connections):
            connection.writer.transport.abort()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _every_second(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.refusals.flush()

    # -- one connection -------------------------------------------------------------------------
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        connection = _Connection(writer, peername[0] if peername else "?")
        try:
            if not self._admit(connection):
                await self._send(writer, Reply(503, "too many connections; retry later\n"), close=True)
                return
            while await self._request(reader, connection):
                pass
        except (OSError, asyncio.IncompleteReadError):
            pass  # the sender went away
        except asyncio.CancelledError:
            # The listener is closing (_shut). Ended, not cancelled: Python 3.11's StreamReaderProtocol
            # logs a whole traceback for each cancelled connection task (one per open connection, to
            # stderr), which 3.12 no longer does.
            pass
        except Exception as exc:  # a bug must not kill the listener; the sender retries on 5xx
            log.exception("listener error")
            self.refusals.note("listener", self.base_url, "500", f"internal error: {exc!r}")
        finally:
            self._connections.discard(connection)
            writer.transport.abort()

    def _admit(self, connection: _Connection) -> bool:
        """Room for one more connection: at the cap, close the one that has waited longest for a
        request head or a body; a request being handled is never closed. An honest request arrives
        in a few packets, so it is the newest and the last to go."""
        if len(self._connections) >= self.cap:
            now = time.monotonic()
            waiting = [(c.evictable_since, c) for c in self._connections if c.evictable_since is not None]
            if not waiting:
                self.refusals.note("listener", self.base_url, "503",
                                   f"connection from {connection.peer} refused (503): all {self.cap} "
                                   "connections are busy with requests")
                return False
            since, oldest = min(waiting, key=lambda pair: pair[0])
            self._connections.discard(oldest)
            oldest.writer.transport.abort()
            self.refusals.note("listener", self.base_url, "closed",
                               f"connection from {oldest.peer} closed to make room: no whole request from it "
                               f"in {now - since:.0f} s, and {self.cap} connections are open")
        self._connections.add(connection)
        return True

    async def _request(self, reader: asyncio.StreamReader, connection: _Connection) -> bool:
        """Serve one request; True when the connection stays open for the next."""
        writer, peer = connection.writer, connection.peer
        connection.evictable_since = time.monotonic()
        try:
            async with asyncio.timeout(HEAD_TIMEOUT):
                head = await reader.readuntil(b"\r\n\r\n")
        except TimeoutError:
            if not connection.served:  # an idle keep-alive connection is no fault; a slow head is
                self.refusals.note("listener", self.base_url, "timeout",
                                   f"connection from {peer} closed: no whole request head within {HEAD_TIMEOUT:g} s")
            return False
        except asyncio.LimitOverrunError:
            return await self._refuse(writer, peer, Reply(431, f"request head over {MAX_HEAD} bytes\n"))
        except asyncio.IncompleteReadError:
            return False
        connection.evictable_since = None
        connection.served += 1
        try:
            request = parse_head(head)
        except RequestHeadError as exc:
            return await self._refuse(writer, peer, Reply(exc.status, f"{exc}\n"))
        parts = urlsplit(request.target)
        endpoint = self.endpoints.get(parts.path)
        if endpoint is None:
            return await self._answer_early(reader, writer, request, Reply(404, "no source listens at this path\n"))
        if request.method not in endpoint.methods:
            return await self._answer_early(reader, writer, request,
                                            Reply(405, f"use {' or '.join(endpoint.methods)}\n"))
        if request.length > self.max_bytes:
            endpoint.too_large(request.length, self.max_bytes, peer)
            return await self._answer_early(reader, writer, request,
                                            Reply(413, f"body over {human_size(self.max_bytes)}\n"))
        early = endpoint.precheck(request.method, request.headers, peer)
        if early is not None:
            return await self._answer_early(reader, writer, request, early)
        held = request.length if request.length > SMALL_BODY else 0
        if held and self._held + held > self.budget:
            self.refusals.note(endpoint.name, endpoint.url, "503",
                               f"request from {peer} refused (503): {human_size(self._held)} of bodies are being "
                               f"received already (the limit is {human_size(self.budget)})")
            return await self._answer_early(reader, writer, request,
                                            Reply(503, "too many large bodies at once; retry later\n"))
        self._held += held
        try:
            if request.expect_continue and request.length:
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            seconds = BODY_TIMEOUT + request.length / BODY_RATE
            connection.evictable_since = time.monotonic()
            try:
                async with asyncio.timeout(seconds):
                    body = await reader.readexactly(request.length)
            except TimeoutError:
                self.refusals.note(endpoint.name, endpoint.url, "timeout",
                                   f"request from {peer} closed: body of {human_size(request.length)} not "
                                   f"complete within {seconds:.0f} s")
                return False
            connection.evictable_since = None
            query = parse_qs(parts.query, keep_blank_values=True)
            reply = await asyncio.get_running_loop().run_in_executor(
                self._pool, _handle, endpoint, request, query, body, peer, self.refusals)
            del body
        finally:
            self._held -= held
        await self._send(writer, reply, close=not request.keep_alive)
        return request.keep_alive

    async def _refuse(self, writer: asyncio.StreamWriter, peer: str, reply: Reply) -> bool:
        """A request that cannot even be read (malformed head): answer, log, close."""
        self.refusals.note("listener", self.base_url, str(reply.status),
                           f"request from {peer} refused ({reply.status}): {reply.text.strip()}")
        await self._send(writer, reply, close=True)
        return False

    async def _answer_early(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request,
                            reply: Reply) -> bool:
        """Answer before the body is read. The connection then closes, after reading and dropping the
        body (up to DRAIN_LIMIT in DRAIN_TIME), so the sender reads the answer and not a reset."""
        if not request.length:
            await self._send(writer, reply, close=not request.keep_alive)
            return request.keep_alive
        await self._send(writer, reply, close=True)
        left = request.length
        if left <= DRAIN_LIMIT:
            try:
                async with asyncio.timeout(DRAIN_TIME):
                    while left > 0:
                        chunk = await reader.read(min(left, 65536))
                        if not chunk:
                            break
                        left -= len(chunk)
            except TimeoutError:
                pass
        return False

    async def _send(self, writer: asyncio.StreamWriter, reply: Reply, close: bool) -> None:
        data = reply.text.encode("utf-8")
        try:
            phrase = HTTPStatus(reply.status).phrase
        except ValueError:
            phrase = ""
        lines = [f"HTTP/1.1 {reply.status} {phrase}", "Server: parser-listener",
                 f"Content-Type: {reply.content_type}", f"Content-Length: {len(data)}"]
        if reply.status == 503:
            lines.append(f"Retry-After: {RETRY_AFTER}")
        if close:
            lines.append("Connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data)
        async with asyncio.timeout(WRITE_TIMEOUT):
            await writer.drain()


def _handle(endpoint: Endpoint, request: Request, query: Mapping[str, list[str]], body: bytes, peer: str,
            refusals: RefusalLog) -> Reply:
    """Worker thread: the endpoint's answer; a bug answers 500 (the sender retries), never a hang-up."""
    try:
        return endpoint.handle(request.method, query, request.headers, body, peer)
    except Exception as exc:  # noqa: BLE001
        log.exception("listener error at %s", endpoint.url)
        refusals.note("listener", endpoint.url, "500", f"internal error (500): {exc!r}")
        return Reply(500, "internal error\n")
