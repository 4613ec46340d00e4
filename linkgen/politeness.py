"""Being a good guest: robots.txt (parsed by protego) and its Crawl-delay, and a page fetched only
when its host's slots (parser/fetch/host_slots.py: the job's delay, a Retry-After hold) allow it.

Shared by the worker threads of a run, so it locks; nothing here writes a file. A held host gets
no request at all (robots.txt included) until its hold ends: the fetcher asks its HostSlots inside
the host's connection slot, and tells them of a refusal before that slot goes to the next request,
so a request queued behind the refused one is not sent either, whoever asked it (a feed poll too).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from protego import Protego

from parser.core.errors import FetchError
from parser.fetch.host_slots import HostHeldError, HostSlots, host_key
from parser.fetch.http import Fetcher, FetchResult

__all__ = ["HTML_ACCEPT", "HostHeldError", "HostSlots", "Robots", "host_key", "polite_get"]

ROBOTS_MAX_BYTES = 500 * 1024  # what Google reads of a robots.txt; the rest is ignored
MAX_CRAWL_DELAY = 60.0         # a Crawl-delay above this is read as this: a day per page is no crawl
ROBOTS_TTL = 24 * 3600.0
ROBOTS_RETRY = 600.0           # seconds before an unreadable robots.txt is asked again
HTML_ACCEPT = "text/html, application/xhtml+xml;q=0.9, */*;q=0.5"


class Robots:
    """robots.txt per scheme+host+port, fetched once (per day) on first use and kept in memory.

    A missing robots.txt (any 4xx) allows everything; one that cannot be fetched (5xx, timeout)
    forbids the host until the next try, as search engines do: its owner may be in trouble.
    """

    def __init__(self, fetcher: Fetcher, user_agent: str, *, clock: Callable[[], float] = time.time,
                 gate: HostSlots | None = None):
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
            rules, problem, ttl = self._fetch(url)
            self._hosts[key] = (rules, self.clock() + ttl, problem)
            return rules, problem

    def _fetch(self, url: str) -> tuple[Protego | None, str, float]:
        parts = urlsplit(url)
        robots_url = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}/robots.txt"
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


def polite_get(url: str, *, fetcher: Fetcher, host_slots: HostSlots, delay: float,
               robots: Robots | None = None, may_follow: Callable[[str], bool] | None = None,
               etag: str | None = None, last_modified: str | None = None) -> FetchResult:
    """Fetch a page after robots.txt allows it and the host's pause has passed; conditionally (a 304
    when unchanged) with `etag`/`last_modified` from an earlier visit. Raises FetchError:
    HostHeldError when the host is held (nothing was sent), with retry_after set when this request
    was refused with Retry-After (the host is then held)."""
    host_slots.reserve(url, 0)  # a held host: not even its robots.txt
    if robots is not None:
        refused = robots.check(url)
        if refused:
            host_slots.reserve(url, 0)  # robots.txt itself was refused with Retry-After: the page waits too
            raise FetchError(refused, permanent=refused.startswith("disallowed"))
        delay = max(delay, robots.crawl_delay(url))
    host_slots.wait(url, delay)
    return fetcher.get(url, accept=HTML_ACCEPT, may_follow=may_follow, gate=host_slots, etag=etag or None,
                       last_modified=last_modified or None)
