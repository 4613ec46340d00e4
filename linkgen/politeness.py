"""Being a good guest: robots.txt (parsed by protego) and a pause between requests to one host.

Both are shared by the worker threads of a run, so both lock; neither writes a file.
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
HTML_ACCEPT = "text/html, application/xhtml+xml;q=0.9, */*;q=0.5"


def host_key(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{parts.port or ''}"


class Robots:
    """robots.txt per scheme+host+port, fetched once (per day) on first use and kept in memory.

    A missing robots.txt (any 4xx) allows everything; one that cannot be fetched (5xx, timeout)
    forbids the host until the next try, as search engines do: its owner may be in trouble.
    """

    def __init__(self, fetcher: Fetcher, user_agent: str, *, clock: Callable[[], float] = time.time):
        self.fetcher = fetcher
        self.user_agent = user_agent
        self.clock = clock
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
            result: FetchResult = self.fetcher.get(robots_url, accept="text/plain, */*;q=0.5")
        except FetchError as exc:
            if exc.status is not None and 400 <= exc.status < 500:
                return Protego.parse(""), "", ROBOTS_TTL
            return None, f"robots.txt could not be read ({exc}); not crawling this host for now", 600.0
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


class HostPacer:
    """Spaces requests to one host by at least `delay` seconds, across all worker threads.

    A worker reserves the next free moment for its host and sleeps until then, so N workers
    asking at once are served one `delay` apart rather than all together.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, stop: threading.Event | None = None):
        self.clock = clock
        self.stop = stop or threading.Event()
        self._lock = threading.Lock()
        self._next: dict[str, float] = {}

    def reserve(self, url: str, delay: float) -> float:
        """Book a moment for a request to `url`'s host; return the seconds to wait for it."""
        if delay <= 0:
            return 0.0
        key = host_key(url)
        with self._lock:
            now = self.clock()
            at = max(now, self._next.get(key, 0.0))
            self._next[key] = at + delay
            return at - now

    def wait(self, url: str, delay: float) -> None:
        """Sleep until this request's turn; raise FetchError when the daemon stops meanwhile."""
        pause = self.reserve(url, delay)
        if pause > 0 and self.stop.wait(pause):
            raise FetchError("abandoned: the daemon is stopping")


def polite_get(url: str, *, fetcher: Fetcher, pacer: HostPacer, delay: float,
               robots: Robots | None = None, may_follow: Callable[[str], bool] | None = None) -> FetchResult:
    """Fetch a page after robots.txt allows it and the host's pause has passed. Raises FetchError."""
    if robots is not None:
        refused = robots.check(url)
        if refused:
            raise FetchError(refused, permanent=refused.startswith("disallowed"))
        delay = max(delay, robots.crawl_delay(url))
    pacer.wait(url, delay)
    return fetcher.get(url, accept=HTML_ACCEPT, may_follow=may_follow)
