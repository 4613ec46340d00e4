"""HTTP (and file) fetching with the limits a long-running daemon needs.

Only this module talks to the network. It turns every outcome into either a FetchResult or one
FetchError whose message a person understands. Limits are enforced where the bytes come in: a
timeout per read, a total deadline per fetch, a cap on the body after decompression, a cap on
redirects; and every request asks its host's slots (parser/fetch/host_slots.py: PER_HOST, holds).

The deadline is enforced by cutting the connection, not only by checking the clock between reads:
a read timeout starts again with every byte, so a server that sends its status line or headers one
byte a second would otherwise hold a worker for as long as it likes. Messages never carry a
source's header values, and addresses in them pass through redact_url.

A fetcher made by `public_only()` (full text of a stranger's links) connects only to public addresses:
the name is resolved here and every address it gives is checked before one is connected to, on every
hop of a redirect, so a link to 127.0.0.1, 169.254.169.254 or a name resolving to 10.x is never asked.
"""
from __future__ import annotations

import copy
import email.utils
import heapq
import ipaddress
import itertools
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from http import HTTPStatus
from pathlib import Path
from typing import Protocol
from urllib.parse import urljoin, urlsplit
from urllib.request import url2pathname

import requests
import urllib3
from requests.adapters import HTTPAdapter

from ..core.clock import wall
from ..core.errors import FetchError
from ..core.urls import redact_url
from .host_slots import HostSlots, fetching
from .host_slots import slot_wait as slot_wait  # the daemon times its polls with it

CHUNK = 64 * 1024
PERMANENT_REDIRECTS = (301, 308)
REDIRECTS = (301, 302, 303, 307, 308)
# Answers that will not change by asking again soon: the source is gone or forbidden to us.
PERMANENT_FAILURES = (404, 410)
# Request headers that carry credentials: never sent on to another origin by a redirect.
CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "cookie")
# Seconds a Last-Modified may be ahead of the response's Date (one server's clock, but perhaps two of
# its machines) or of ours. Beyond that it is a date in the future: sent back as If-Modified-Since,
# a server that compares dates would answer 304 until that day.
CLOCK_SKEW = 60.0


class RequestGate(Protocol):
    """Asked inside the host's connection slot just before each request is sent (the fetcher's own
    HostSlots always; another when a caller gives one), may raise FetchError to send nothing; told of a 429/503 with
    Retry-After before that slot goes to the next request, so a request queued behind a refused one
    is never sent before the pause the server asked for."""

    def before_request(self, url: str) -> None: ...
    def refused(self, url: str, retry_after: float) -> None: ...


@dataclass(frozen=True)
class FetchResult:
    url: str                      # final address, after redirects
    status: int                   # 200-range, or 304 when nothing changed
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)  # lower-cased names
    etag: str | None = None
    last_modified: str | None = None
    moved_to: str | None = None   # set when a 301/308 was followed: the new permanent address
    # The server's Last-Modified when it was later than its own Date (or our clock): not kept in
    # last_modified, so it is never sent back; the daemon says so.
    future_last_modified: str | None = None

    @property
    def not_modified(self) -> bool:
        return self.status == 304


def human_size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def _seconds(x: float) -> str:
    return f"{x:g} s"


class HostBusyError(FetchError):
    """No PER_HOST slot of the host came free in time: with SHARED, other daemons hold them all."""


class _Cutoff:
    """Cuts the connection of one fetch when its deadline passes (see the module's docstring)."""

    def __init__(self, seconds: float):
        self.fired = False
        self.cancelled = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        _WATCHDOG.watch(self, seconds)

    def attach(self, sock: socket.socket | None) -> None:
        with self._lock:
            self._sock = sock
            if self.fired:
                _shutdown(sock)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True

    def fire(self) -> None:
        with self._lock:
            if self.cancelled:
                return
            self.fired = True
            _shutdown(self._sock)


class _Watchdog:
    """One thread serves every fetch's deadline: a heap of (when, cutoff), the earliest on top.
    (A timer thread per fetch made 644 threads in a harvest of about 500 fetches.) A cancelled
    cutoff stays in the heap until its time comes and is then dropped without firing."""

    def __init__(self):
        self._heap: list[tuple[float, int, _Cutoff]] = []
        self._wake = threading.Condition()
        self._order = itertools.count()  # ties in time never compare two cutoffs
        self._thread: threading.Thread | None = None

    def watch(self, cutoff: _Cutoff, seconds: float) -> None:
        with self._wake:
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._order), cutoff))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="fetch-deadlines", daemon=True)
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._wake.wait()
                    continue
                delay = self._heap[0][0] - time.monotonic()
                if delay > 0:
                    self._wake.wait(delay)
                    continue
                due = heapq.heappop(self._heap)[2]
            due.fire()  # outside the heap's lock: a shutdown may take a moment


_WATCHDOG = _Watchdog()


def _end(response: requests.Response, cutoff: _Cutoff) -> None:
    """Done with a response. One with nothing left to read (a 304, a 204, an empty page, a body read
    to its end) hands its connection back to the pool: the next request to the host reuses it, where
    closing it cost every poll of an unchanged feed a new connection (a TLS handshake on a real host).
    Any other is closed: a body left unread (a redirect's, an error page's, one over the cap) is never
    read just to keep its connection, nor is one whose deadline cut the socket."""
    if response.raw.length_remaining == 0 and not cutoff.fired:
        response.raw.read()  # reads nothing; at the end urllib3 puts the connection back in the pool
    response.close()


def _shutdown(sock: socket.socket | None) -> None:
    """Wake a thread blocked reading `sock`: its recv returns end-of-file at once."""
    if sock is None:
        return
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's, under TLS too
    except OSError:
        pass  # already closed


_fetching = fetching  # the _Cutoff of the fetch this worker thread is doing (parser/fetch/host_slots.py)


class _WatchedConnection(urllib3.connection.HTTPConnection):
    def getresponse(self, *args, **kwargs):
        cutoff = getattr(_fetching, "cutoff", None)
        if cutoff is not None:
            cutoff.attach(self.sock)
        return super().getresponse(*args, **kwargs)


class _WatchedTLSConnection(urllib3.connection.HTTPSConnection):
    getresponse = _WatchedConnection.getresponse


class _WatchedPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _WatchedConnection


class _WatchedTLSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _WatchedTLSConnection


class InternalAddressError(FetchError):
    """A public-only fetcher was sent to an address that is not public (loopback, private, link-local...)."""


def public_address(ip: str) -> bool:
    """Whether `ip` is on the public internet: not loopback, private, link-local (169.254/16, the cloud
    metadata address), shared (100.64/10), reserved or multicast; an IPv4 address inside an IPv6 one
    (::ffff:10.0.0.1, 6to4, Teredo) is judged by the IPv4 address."""
    address = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or address.sixtofour or (address.teredo or (None, None))[1]
        if inner is not None:
            address = inner
    return address.is_global and not address.is_multicast


def _public_socket(conn: urllib3.connection.HTTPConnection) -> socket.socket:
    """Resolve the host, refuse it unless every address it has is public, and connect to one of those
    addresses: the address checked is the address connected to (a name that resolves again to another
    address in between changes nothing). TLS still verifies the certificate against the host's name."""
    try:
        infos = socket.getaddrinfo(conn._dns_host, conn.port, 0, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise urllib3.exceptions.NameResolutionError(conn.host, conn, exc) from exc
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))  # an int only for AF_UNIX: never here
    internal = [a for a in addresses if not public_address(a)]
    if internal:
        raise InternalAddressError(f"{conn.host} is an internal address ({internal[0]}); not fetched "
                                   "(full_text_internal lets a source's full text reach such addresses)",
                                   permanent=True)
    last: OSError | None = None
    for address in addresses:
        try:
            return urllib3.util.connection.create_connection((address, conn.port), conn.timeout,
                                                             source_address=conn.source_address,
                                                             socket_options=conn.socket_options)
        except TimeoutError as exc:
            raise urllib3.exceptions.ConnectTimeoutError(conn, f"Connection to {conn.host} timed out") from exc
        except OSError as exc:
            last = exc
    raise urllib3.exceptions.NewConnectionError(conn, f"Failed to establish a new connection: {last}")


class _PublicConnection(_WatchedConnection):
    def _new_conn(self) -> socket.socket:
        return _public_socket(self)


class _PublicTLSConnection(_WatchedTLSConnection):
    def _new_conn(self) -> socket.socket:
        return _public_socket(self)


class _PublicPool(_WatchedPool):
    ConnectionCls = _PublicConnection


class _PublicTLSPool(_WatchedTLSPool):
    ConnectionCls = _PublicTLSConnection


def _session(user_agent: str, pool_size: int, per_host: int, public_only: bool = False) -> requests.Session:
    session = requests.Session()
    session.headers.update({
        "User-Agent": user_agent,
        "Accept-Encoding": "gzip, deflate",
        "Accept": "application/atom+xml, application/rss+xml, application/rdf+xml, application/feed+json,"
                  " application/json;q=0.9, application/xml;q=0.9, text/xml;q=0.9, */*;q=0.8",
    })
    # requests would read the proxy settings of the environment; a daemon keeps to its config (and a
    # proxy would connect for us, past the public-only check).
    session.trust_env = False
    adapter = HTTPAdapter(pool_connections=max(pool_size, 10), pool_maxsize=per_host, max_retries=0)
    adapter.poolmanager.pool_classes_by_scheme = ({"http": _PublicPool, "https": _PublicTLSPool} if public_only
                                                  else {"http": _WatchedPool, "https": _WatchedTLSPool})
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


class Fetcher:
    """One pooled requests session shared by the worker threads."""

    def __init__(self, *, user_agent: str, timeout: float, deadline: float, max_bytes: int,
                 max_redirects: int, per_host: int, pool_size: int = 32, slots: HostSlots | None = None):
        """`slots`: the host slots every request asks (PER_HOST, pacing, holds), the daemon's or the group's
        (parser/group/parts.py), their `stop` the fetcher's; none given: its own, never stopped."""
        self.timeout = timeout
        self.deadline = deadline
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.slots = slots if slots is not None else HostSlots(per_host)
        self.stop = self.slots.stop
        self.wall = wall  # judges a Last-Modified when the server sends no Date
        self._pooling = (user_agent, pool_size, per_host)
        self.session = _session(*self._pooling)
        self._sessions = [self.session]  # this one's and its public-only copies', closed together

    def close(self) -> None:
        for session in self._sessions:
            session.close()
        self.slots.close()

    def hold_crawl(self, url: str, seconds: float) -> None:
        """A source's Retry-After holds its host's crawl too (parser/fetch/host_slots.py)."""
        self.slots.hold_crawl(url, seconds)

    def get(self, url: str, *, headers: Mapping[str, str] | None = None, etag: str | None = None,
            last_modified: str | None = None, accept: str | None = None,
            may_follow: Callable[[str], bool] | None = None, gate: RequestGate | None = None) -> FetchResult:
        """Fetch `url`, conditionally when etag/last_modified are known. Raises FetchError.

        may_follow, when given, vets every redirect target before it is requested (a harvest keeps
        to its allowed domains even when a server sends it elsewhere); gate, when given, is asked
        before every request and told of refusals (see RequestGate).
        """
        if url.startswith("file:"):
            return _read_file(url, self.max_bytes, last_modified)
        _check_headers(headers or {})
        request_headers = dict(headers or {})
        if accept:
            request_headers["Accept"] = accept
        if etag:
            request_headers["If-None-Match"] = etag
        if last_modified and not _later(last_modified, self.wall()):
            # A future date saved before it was judged here (an older version) is not sent either.
            request_headers["If-Modified-Since"] = last_modified
        deadline = time.monotonic() + self.deadline
        cutoff = _fetching.cutoff = _Cutoff(self.deadline)
        try:
            return self._follow(url, request_headers, set(headers or {}), deadline, cutoff, may_follow, gate)
        except FetchError as exc:
            if cutoff.fired and not isinstance(exc, HostBusyError):
                raise FetchError(f"took longer than the {_seconds(self.deadline)} deadline "
                                 "(the server answers too slowly)") from None
            raise
        finally:
            cutoff.cancel()
            _fetching.cutoff = None

    def _follow(self, url: str, request_headers: dict[str, str], own_headers: set[str], deadline: float,
                cutoff: _Cutoff, may_follow: Callable[[str], bool] | None = None,
                gate: RequestGate | None = None) -> FetchResult:
        """GET `url`, following redirects by hand so every hop is checked and counted. Every hop asks the
        host's slots (a held host gets nothing) and tells them of a Retry-After: as a source's request,
        or as a paced one when a `gate` is given (a job's: parser/fetch/host_slots.py says the difference)."""
        gates: list[RequestGate] = ([self.slots.sources] if gate is None else [gate] if gate is self.slots
                                    else [self.slots, gate])
        seen = {url}
        current = url
        only_permanent_hops = True  # the source has moved only if every hop said so
        for _hop in range(self.max_redirects + 1):
            with self.slots.slot(current):
                for asked in gates:
                    asked.before_request(current)
                response = self._open(current, request_headers)
                try:
                    if response.status_code in REDIRECTS and "location" in response.headers:
                        target = urljoin(current, response.headers["location"])
                        if urlsplit(target).scheme not in ("http", "https"):
                            raise FetchError(f"redirect to a non-HTTP address: {redact_url(target)}",
                                             status=response.status_code)
                        if may_follow is not None and not may_follow(target):
                            raise FetchError(f"redirect to {redact_url(target)} leaves the allowed domains; "
                                             "not followed", status=response.status_code, permanent=True)
                        if target in seen:
                            raise FetchError(f"redirect loop at {redact_url(target)}", status=response.status_code)
                        if _origin(target) != _origin(current):
                            # Credentials the source was given are for its own server, not for wherever
                            # it sends us.
                            request_headers = {k: v for k, v in request_headers.items()
                                               if k not in own_headers and k.lower() not in CREDENTIAL_HEADERS}
                        only_permanent_hops &= response.status_code in PERMANENT_REDIRECTS
                        seen.add(target)
                        current = target
                        continue
                    moved_to = current if current != url and only_permanent_hops else None
                    return self._finish(response, current, deadline, moved_to, cutoff)
                except FetchError as exc:
                    if exc.retry_after is not None:
                        for asked in gates:  # still inside the slot: see RequestGate
                            asked.refused(current, exc.retry_after)
                    raise
                finally:
                    _end(response, cutoff)
        raise FetchError(f"more than {self.max_redirects} redirects")

    def with_timeout(self, seconds: float) -> Fetcher:
        """This fetcher (same session, per-host slots and caps) with its own timeout and deadline, for
        requests that must not take as long as a source's (the full text of an entry's page)."""
        clone = copy.copy(self)
        clone.timeout = clone.deadline = seconds
        return clone

    def public_only(self) -> Fetcher:
        """This fetcher (same limits and per-host slots) connecting only to public addresses, redirects
        included; an internal one raises InternalAddressError. Its own connection pool: a connection the
        source fetches opened to an internal host is never lent to it."""
        clone = copy.copy(self)
        clone.session = _session(*self._pooling, public_only=True)
        self._sessions.append(clone.session)
        return clone

    def post_form(self, url: str, form: Mapping[str, str]) -> FetchResult:
        """POST a form (a WebSub subscription request) under the same limits; FetchError unless 2xx.
        Redirects are not followed: a hub that moved is reported, not chased with our secret."""
        deadline = time.monotonic() + self.deadline
        cutoff = _fetching.cutoff = _Cutoff(self.deadline)
        try:
            with self.slots.slot(url):
                response = self._open(url, {}, method="POST", data=dict(form))
                try:
                    if response.status_code in REDIRECTS:
                        raise FetchError(f"{_status_message(response.status_code)} (redirects are not followed "
                                         "for a POST)", status=response.status_code)
                    return self._finish(response, url, deadline, None, cutoff)
                finally:
                    _end(response, cutoff)
        finally:
            cutoff.cancel()
            _fetching.cutoff = None

    def _open(self, url: str, headers: Mapping[str, str], method: str = "GET",
              data: Mapping[str, str] | None = None) -> requests.Response:
        try:
            return self.session.request(method, url, headers=headers, data=data, stream=True,
                                        allow_redirects=False, timeout=(self.timeout, self.timeout))
        except requests.exceptions.ConnectTimeout:
            raise FetchError(f"connect timed out after {_seconds(self.timeout)}") from None
        except requests.exceptions.ReadTimeout:
            raise FetchError(f"read timed out after {_seconds(self.timeout)}") from None
        except requests.exceptions.SSLError as exc:
            raise FetchError(f"TLS error: {_root_cause(exc)}") from None
        except requests.exceptions.ConnectionError as exc:
            raise FetchError(_connection_message(exc, url)) from None
        except requests.exceptions.RequestException as exc:
            raise FetchError(f"request failed: {_scrub(_root_cause(exc), url)}") from None

    def _finish(self, response: requests.Response, url: str, deadline: float,
                moved_to: str | None, cutoff: _Cutoff) -> FetchResult:
        status = response.status_code
        headers = {k.lower(): v for k, v in response.headers.items()}
        if status == 304:
            return FetchResult(url=url, status=304, headers=headers, moved_to=moved_to,
                               etag=headers.get("etag"), last_modified=headers.get("last-modified"))
        if status >= 400 or status < 200:
            raise FetchError(_status_message(status), status=status, permanent=status in PERMANENT_FAILURES,
                             retry_after=_retry_after(headers.get("retry-after"))
                             if status in (429, 503) else None)
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes and "content-encoding" not in headers:
            raise FetchError(f"response over {human_size(self.max_bytes)} "
                             f"(Content-Length {human_size(int(declared))})", status=status)
        body = self._read_body(response.raw, deadline)
        if cutoff.fired:  # the cut connection looked like the end of a body without Content-Length
            raise FetchError(f"took longer than the {_seconds(self.deadline)} deadline "
                             f"(server sends too slowly; {human_size(len(body))} received)")
        last_modified = headers.get("last-modified")
        future = last_modified if last_modified and _later(last_modified, _http_date(headers.get("date"))
                                                           or self.wall()) else None
        return FetchResult(url=url, status=status, body=body, headers=headers, moved_to=moved_to,
                           etag=headers.get("etag"), last_modified=None if future else last_modified,
                           future_last_modified=future)

    def _read_body(self, raw: urllib3.HTTPResponse, deadline: float) -> bytes:
        """Read the decompressed body in single socket reads, so the deadline and cap are checked often."""
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                if self.stop.is_set():
                    raise FetchError("abandoned: the daemon is stopping")
                if time.monotonic() > deadline:
                    raise FetchError(f"took longer than the {_seconds(self.deadline)} deadline "
                                     f"(server sends too slowly; {human_size(size)} received)")
                chunk = raw.read1(CHUNK, decode_content=True)
                if not chunk:
                    break
                size += len(chunk)
                if size > self.max_bytes:
                    raise FetchError(f"response over {human_size(self.max_bytes)}")
                chunks.append(chunk)
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError):
            raise FetchError(f"read timed out after {_seconds(self.timeout)}") from None
        except urllib3.exceptions.DecodeError as exc:
            raise FetchError(f"body does not decompress: {_root_cause(exc)}") from None
        except (urllib3.exceptions.ProtocolError, urllib3.exceptions.HTTPError, OSError) as exc:
            raise FetchError(f"connection broke while reading: {_root_cause(exc)}") from None
        return b"".join(chunks)


def _read_file(url: str, max_bytes: int, last_modified: str | None) -> FetchResult:
    """file:// sources: the file's mtime plays Last-Modified, so an unchanged file is a 304."""
    path = Path(url2pathname(urlsplit(url).path))
    try:
        stat = path.stat()
        stamp = email.utils.formatdate(stat.st_mtime, usegmt=True) + f" ({stat.st_mtime_ns})"
        if last_modified == stamp:
            return FetchResult(url=url, status=304, last_modified=stamp)
        if stat.st_size > max_bytes:
            raise FetchError(f"file over {human_size(max_bytes)}")
        with open(path, "rb") as f:
            body = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise FetchError(f"file not found: {path}", permanent=True) from None
    except (IsADirectoryError, PermissionError) as exc:
        raise FetchError(f"file cannot be read: {exc.strerror}: {path}") from None
    if len(body) > max_bytes:
        raise FetchError(f"file over {human_size(max_bytes)}")
    content_type = "application/json" if path.suffix == ".json" else "application/xml"
    return FetchResult(url=url, status=200, body=body, last_modified=stamp,
                       headers={"content-type": content_type})


def _status_line(status: int) -> str:
    try:
        return f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


def _status_message(status: int) -> str:
    if status == 410:  # the daemon then asks only every few hours (sources/state.py, SourceState.failed: GONE_EVERY)
        return "HTTP 410 Gone: the server says this address is gone for good; marked gone"
    return _status_line(status)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port


def _check_headers(headers: Mapping[str, str]) -> None:
    """Refuse header values HTTP cannot carry before requests does: its message would quote the value,
    and a source's header values are often secrets."""
    for name, value in headers.items():
        if not name or any(c in name for c in " \t\r\n:\0") or any(c in value for c in "\r\n\0") \
                or value[:1] in (" ", "\t"):
            raise FetchError(f"request header {name.strip()!r} has a name or value HTTP does not allow (a line "
                             "break, NUL or leading space): check params.py, or the environment variable of auth")


def _scrub(text: str, url: str) -> str:
    """Hide in a library's message whatever of `url` redact_url hides (userinfo, tokens): urllib3
    quotes the path and query ("with url: /feed?token=..."), requests sometimes the whole address."""
    safe = redact_url(url)
    if safe == url:
        return text
    for raw, hidden in ((url, safe), (_path_query(url), _path_query(safe)),
                        (urlsplit(url).netloc, urlsplit(safe).netloc)):
        if raw and raw != hidden:
            text = text.replace(raw, hidden)
    return text


def _path_query(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + ("?" + parts.query if parts.query else "")


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date); None when absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    when = _http_date(value)
    return None if when is None else max(0.0, when - time.time())


def _http_date(value: str | None) -> float | None:
    """Epoch seconds of an HTTP date (a date without a zone is UTC); None when absent or unreadable."""
    try:
        when = email.utils.parsedate_to_datetime(value or "")
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _later(http_date: str, now: float) -> bool:
    """Whether `http_date` is more than CLOCK_SKEW seconds after `now` (an unreadable date is not)."""
    when = _http_date(http_date)
    return when is not None and when > now + CLOCK_SKEW


def _root_cause(exc: BaseException) -> str:
    while exc.__context__ is not None and exc.__context__ is not exc and len(str(exc)) > 150:
        exc = exc.__context__
    text = str(exc) or type(exc).__name__
    return text if len(text) < 200 else text[:197] + "..."


def _connection_message(exc: BaseException, url: str) -> str:
    text = repr(exc)
    host = urlsplit(url).hostname
    if "Name or service not known" in text or "nodename nor servname" in text or "NameResolutionError" in text \
            or "Temporary failure in name resolution" in text:
        return f"host not found: {host}"
    if "Connection refused" in text or "ConnectionRefused" in text:
        return f"connection refused by {host}"
    if "timed out" in text:
        return "connect timed out"
    if "RemoteDisconnected" in text or "Connection aborted" in text:
        return f"{host} closed the connection without answering"
    if "Network is unreachable" in text:
        return f"network unreachable for {host}"
    return f"connection failed: {_scrub(_root_cause(exc), url)}"

