"""Being a good guest: robots.txt (parsed by protego), a pause between requests to one host, and
the wait a server asks for with 429 or 503 and Retry-After.

All are shared by the worker threads of a run, so they lock; none writes a file. A held host gets
no request at all (robots.txt included) until its hold ends: the pacer is the fetcher's gate, asked
inside the host's connection slot, and it hears of a refusal before that slot goes to the next
request, so a request queued behind the refused one is not sent either.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from protego import Protego

from parser.errors import FetchError
from parser.fetch import Fetcher, FetchResult

ROBOTS_MAX_BYTES = 500 * 1024  # what Google reads of a robots.txt; the rest is ignored
MAX_CRAWL_DELAY = 60.0         # a Crawl-delay above this is read as this: a day per page is no crawl
ROBOTS_TTL = 24 * 3600.0
ROBOTS_RETRY = 600.0           # seconds before an unreadable robots.txt is asked again
MAX_HOLD = 24 * 3600.0         # a Retry-After longer than a day is read as a day, as for the feeds
HTML_ACCEPT = "text/html, application/xhtml+xml;q=0.9, */*;q=0.5"


def host_key(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{parts.port or ''}"


class Robots:
    """robots.txt per scheme+host+port, fetched once (per day) on first use and kept in memory.

    A missing robots.txt (any 4xx) allows everything; one that cannot be fetched (5xx, timeout)
    forbids the host until the next try, as search engines do: its owner may be in trouble.
    """

    def __init__(self, fetcher: Fetcher, user_agent: str, *, clock: Callable[[], float] = time.time,
                 gate: HostPacer | None = None):
        self.fetcher = fetcher
        self.user_agent = user_agent
        self.clock = clock
        self.gate = gate  # robots.txt is a request to the host like any other: held hosts get none
        self._lock = threading.Lock()
        self._hosts: dict[str, tuple[Protego | None, float, str]] = {}  # key -> (rules, until, problem)
        self._host_locks: dict[str, threading.Lock] = {}

    def _rules(self, url: str) -> tuple[Protego | None, str]:
        key = host_key(url)
        with self._lock:
            host_lock = self._host_locks.setdefault(key, threading.Lock())
        with host_lock:  # one fetch per host even when many workers ask at once
            known = self._hosts.get(key)
            if known is not None and known[1] > self.clock():
                return known[0], known[2]
            rules, problem, ttl = self._fetch(key)
            self._hosts[key] = (rules, self.clock() + ttl, problem)
            return rules, problem

    def _fetch(self, key: str) -> tuple[Protego | None, str, float]:
        parts = urlsplit(key)
        robots_url = f"{parts.scheme}://{parts.netloc.rstrip(':')}/robots.txt"
        try:
            result: FetchResult = self.fetcher.get(robots_url, accept="text/plain, */*;q=0.5", gate=self.gate)
        except FetchError as exc:
            if exc.status is not None and 400 <= exc.status < 500 and exc.status != 429:
                return Protego.parse(""), "", ROBOTS_TTL
            # 429 is no "missing robots.txt": the server is busy, as with a 5xx. After a Retry-After
            # the gate holds the host, so robots.txt can be asked again at the next use: not before.
            retry = 0.0 if exc.retry_after is not None and self.gate is not None else ROBOTS_RETRY
            return None, f"robots.txt could not be read ({exc}); not crawling this host for now", retry
        text = result.body[:ROBOTS_MAX_BYTES].decode("utf-8", "replace")
        return Protego.parse(text), "", ROBOTS_TTL

    def check(self, url: str) -> str:
        """'' when `url` may be fetched, else why not (for errors.log)."""
        rules, problem = self._rules(url)
        if rules is None:
            return problem
        if not rules.can_fetch(url, self.user_agent):
            return "disallowed by robots.txt"
        return ""

    def allowed(self, url: str) -> bool:
        return self.check(url) == ""

    def crawl_delay(self, url: str) -> float:
        rules, _ = self._rules(url)
        if rules is None:
            return 0.0
        delay = rules.crawl_delay(self.user_agent) or 0.0
        return min(float(delay), MAX_CRAWL_DELAY)


class HostHeldError(FetchError):
    """A request not sent: its host asked (429/503 with Retry-After) for no requests until later."""

    def __init__(self, host: str, seconds: float):
        super().__init__(f"not sent: {host} asked for no requests for {seconds:.0f} s more (Retry-After)",
                         retry_after=seconds)
        self.host = host
        self.seconds = seconds


class HostPacer:
    """Spaces requests to one host by at least `delay` seconds, across all worker threads, and holds
    a host that asked for a pause (Retry-After) until that pause is over.

    A worker reserves the next free moment for its host and sleeps until then, so N workers
    asking at once are served one `delay` apart rather than all together. A held host is not slept
    through: the worker is told at once (HostHeldError), so the caller can keep the link for later and
    the thread is free for other hosts.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, stop: threading.Event | None = None):
        self.clock = clock
        self.stop = stop or threading.Event()
        self._lock = threading.Lock()
        self._next: dict[str, float] = {}
        self._held: dict[str, float] = {}   # host key -> clock time before which nothing is sent

    def close(self) -> None:
        """Nothing to release here (a shared pacer closes its database connections)."""

    def reserve(self, url: str, delay: float) -> float:
        """Book a moment for a request to `url`'s host; return the seconds to wait for it.
        Raises HostHeldError (nothing booked) while the host is held."""
        key = host_key(url)
        with self._lock:
            now = self.clock()
            self._raise_if_held(key, now)
            if delay <= 0:
                return 0.0
            at = max(now, self._next.get(key, 0.0))
            self._next[key] = at + delay
            return at - now

    def wait(self, url: str, delay: float) -> None:
        """Sleep until this request's turn; raise HostHeldError when the host is held, FetchError when the
        daemon stops meanwhile."""
        pause = self.reserve(url, delay)
        if pause > 0 and self.stop.wait(pause):
            raise FetchError("abandoned: the daemon is stopping")

    # -- holds (Retry-After) ------------------------------------------------------------------
    def hold(self, url: str, seconds: float) -> float:
        """No request to `url`'s host for `seconds` (at most MAX_HOLD); return the seconds it is held."""
        return self.hold_key(host_key(url), seconds)

    def hold_key(self, key: str, seconds: float) -> float:
        """hold() for a host key (host_key of a URL), as the shared group stores them."""
        with self._lock:
            now = self.clock()
            until = now + min(max(seconds, 0.0), MAX_HOLD)
            if until > self._held.get(key, 0.0):
                self._held[key] = until
            return self._held[key] - now

    def held_for(self, url: str) -> float:
        """Seconds until `url`'s host may be asked again (0: now)."""
        return self.key_held_for(host_key(url))

    def key_held_for(self, key: str) -> float:
        with self._lock:
            return max(0.0, self._held.get(key, 0.0) - self.clock())

    def holds(self) -> dict[str, float]:
        """The hosts held now, with the seconds left."""
        with self._lock:
            now = self.clock()
            return {key: until - now for key, until in self._held.items() if until > now}

    def _raise_if_held(self, key: str, now: float) -> None:
        until = self._held.get(key, 0.0)
        if until > now:
            raise HostHeldError(key, until - now)

    # -- the fetcher's gate (parser.fetch.RequestGate) ----------------------------------------
    def before_request(self, url: str) -> None:
        """Inside the host's connection slot, just before sending: a hold set meanwhile counts."""
        with self._lock:
            self._raise_if_held(host_key(url), self.clock())

    def refused(self, url: str, retry_after: float) -> None:
        """The host answered 429/503 with Retry-After: hold it, before its slot is freed."""
        self.hold(url, retry_after)


def polite_get(url: str, *, fetcher: Fetcher, pacer: HostPacer, delay: float,
               robots: Robots | None = None, may_follow: Callable[[str], bool] | None = None) -> FetchResult:
    """Fetch a page after robots.txt allows it and the host's pause has passed. Raises FetchError:
    HostHeldError when the host is held (nothing was sent), with retry_after set when this request
    was refused with Retry-After (the host is then held)."""
    pacer.reserve(url, 0)  # a held host: not even its robots.txt
    if robots is not None:
        refused = robots.check(url)
        if refused:
            pacer.reserve(url, 0)  # robots.txt itself was refused with Retry-After: the page waits too
            raise FetchError(refused, permanent=refused.startswith("disallowed"))
        delay = max(delay, robots.crawl_delay(url))
    pacer.wait(url, delay)
    return fetcher.get(url, accept=HTML_ACCEPT, may_follow=may_follow, gate=pacer)
