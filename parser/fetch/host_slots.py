"""When a host may be asked: the one key for a host and the one place that decides (HostSlots).

Every request to a host passes here, whatever asks it (a feed poll, a harvest page, a pass-2 object,
robots.txt): at most PER_HOST connections to it at once, a job's `delay` (or the host's Crawl-delay)
between two requests, and nothing while the host is held because it answered 429/503 with
Retry-After. Whose request was refused decides how far the hold reaches:
- a paced request's (a job's page, object or robots.txt: the crawl is what weighs on a host) holds
  the host for every request, feed polls included;
- a source's (a feed poll) holds the crawl of that host (paced requests); the source itself waits
  for its own not_before, and another source of the host is held only by a Retry-After of its own,
  as an answer to one feed's address may be about that address alone.
With SHARED the group's subclass (parser/group/shared_hosts.py) adds the shared rows behind the same calls.

Shared by the worker threads of a run, so it locks; it writes no file.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from urllib.parse import urlsplit

from ..core.errors import FetchError

MAX_HOLD = 24 * 3600.0  # a Retry-After longer than a day is read as a day
DEFAULT_PORTS = {"http": 80, "https": 443}

# What this worker thread's fetch is doing: its deadline's cutoff (parser/fetch/http.py) and the seconds
# it waited for host slots.
fetching = threading.local()


def host_key(url: str) -> str:
    """A host as every per-host decision counts it: `scheme://host:port`, the port always written
    (80 and 443 when the URL leaves it out) and an IPv6 literal in brackets, so that the key of a key
    is the key itself (`http://[::1]:8080`), as the group's tables and a job's state.json keep them."""
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").lower()
        port = parts.port or DEFAULT_PORTS.get(parts.scheme.lower()) or ""
    except ValueError:  # a port that is no number: still one host, named as written
        return url.strip().lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme.lower()}://{host}:{port}"


def slot_wait() -> float:
    """Seconds this worker thread has waited for host slots since its last call (a poll's logged time
    is its own fetch and parse, not the wait for another fetch to the same host to end)."""
    waited = getattr(fetching, "slot_wait", 0.0)
    fetching.slot_wait = 0.0
    return waited


def fetch_cut() -> bool:
    """Whether this worker thread's fetch has passed its deadline (a wait for a slot ends there)."""
    cutoff = getattr(fetching, "cutoff", None)
    return cutoff is not None and cutoff.fired


class HostHeldError(FetchError):
    """A request not sent: its host asked (429/503 with Retry-After) for no requests until later."""

    def __init__(self, host: str, seconds: float):
        super().__init__(f"not sent: {host} asked for no requests for {seconds:.0f} s more (Retry-After)",
                         retry_after=seconds)
        self.host = host
        self.seconds = seconds


class Slot:
    """One request's hold on a connection to its host: this machine's semaphore, and whatever
    take()/give_back() add (with SHARED, a row of the group's: parser/group/shared_hosts.py)."""

    def __init__(self, semaphore: threading.BoundedSemaphore, host: str):
        self.semaphore = semaphore
        self.host = host

    def __enter__(self) -> None:
        started = time.monotonic()
        self.semaphore.acquire()
        try:
            self.take()
        except BaseException:
            self.semaphore.release()
            raise
        finally:
            fetching.slot_wait = getattr(fetching, "slot_wait", 0.0) + time.monotonic() - started

    def __exit__(self, *exc) -> None:
        try:
            self.give_back()
        finally:
            self.semaphore.release()

    def take(self) -> None:
        """Called holding the local semaphore, before the request; may raise FetchError."""

    def give_back(self) -> None:
        """Called after the request, before the local semaphore is released."""


class HostSlots:
    """Per host: work handed to workers and connections in flight (at most `per_host` of each), the
    next free moment for a paced request (a job's delay, Crawl-delay), and Retry-After holds (of the
    whole host, or of its crawl: see the module). The fetcher asks it for every request, the
    scheduler before it hands work out.

    A paced worker reserves the next free moment for its host and sleeps until then, so N workers
    asking at once are served one `delay` apart rather than all together. A held host is not slept
    through: the asker is told at once (HostHeldError), so it can keep its work for later and the
    thread is free for other hosts.
    """

    def __init__(self, per_host: int = 2, *, clock: Callable[[], float] = time.monotonic,
                 stop: threading.Event | None = None):
        self.per_host = per_host
        self.clock = clock
        self.stop = stop or threading.Event()
        self._lock = threading.Lock()
        self._semaphores: dict[str, threading.BoundedSemaphore] = {}
        self._booked: Counter[str] = Counter()  # host key -> work handed to workers (parser/fetch/scheduler.py)
        self._next: dict[str, float] = {}   # host key -> clock time of its next free paced moment
        self._held: dict[str, float] = {}   # host key -> clock time before which nothing is sent
        self._crawl_held: dict[str, float] = {}  # host key -> time before which no paced request is sent
        self.sources = SourceRequests(self)  # the fetcher's gate for a source's requests (no pacing)

    def close(self) -> None:
        """Nothing to release here (the group's slots close their database connections)."""

    # -- connections in flight (PER_HOST) -----------------------------------------------------
    def slot(self, url: str) -> Slot:
        """A connection to `url`'s host: `with slots.slot(url): ...` around one request."""
        key = host_key(url)
        with self._lock:
            semaphore = self._semaphores.get(key)
            if semaphore is None:
                semaphore = self._semaphores[key] = threading.BoundedSemaphore(self.per_host)
        return self.make_slot(semaphore, key)

    def make_slot(self, semaphore: threading.BoundedSemaphore, host: str) -> Slot:
        return Slot(semaphore, host)

    def book(self, key: str) -> bool:
        """One more piece of work for the host (a key) when fewer than `per_host` are out, so that no
        worker waits for a connection; False when the host has its PER_HOST out already. The
        scheduler's look-ahead of slot(): it books as it hands work out, unbook() when it comes back."""
        with self._lock:
            if self._booked[key] >= self.per_host:
                return False
            self._booked[key] += 1
            return True

    def unbook(self, key: str) -> None:
        with self._lock:
            self._booked[key] -= 1
            if self._booked[key] <= 0:
                del self._booked[key]

    # -- pacing (a job's delay, Crawl-delay) --------------------------------------------------
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
        """No request to `url`'s host (a URL or a host key) for `seconds` (at most MAX_HOLD); return the
        seconds this hold has left (a longer one set before stands)."""
        return self.hold_key(host_key(url), seconds)

    def hold_key(self, key: str, seconds: float) -> float:
        """hold() for a host key as host_key gives it (as the shared group stores them). A pause that is
        over already (0 seconds or less) changes nothing."""
        return self._hold(self._held, key, seconds)

    def hold_crawl(self, url: str, seconds: float) -> float:
        """No paced request (a job's) to `url`'s host for `seconds`: a source's Retry-After."""
        return self._hold(self._crawl_held, host_key(url), seconds)

    def _hold(self, held: dict[str, float], key: str, seconds: float) -> float:
        with self._lock:
            now = self.clock()
            until = now + min(seconds, MAX_HOLD)
            if until > held.get(key, 0.0):
                held[key] = until
            return max(0.0, held.get(key, 0.0) - now)

    def _until(self, key: str) -> float:
        """Clock time before which no paced request goes to the host (under the lock)."""
        return max(self._held.get(key, 0.0), self._crawl_held.get(key, 0.0))

    def held_for(self, url: str) -> float:
        """Seconds until a paced request may go to `url`'s host again (0: now)."""
        return self.key_held_for(host_key(url))

    def key_held_for(self, key: str) -> float:
        with self._lock:
            return max(0.0, self._until(key) - self.clock())

    def key_held_everything_for(self, key: str) -> float:
        """Seconds until any request (a source's too) may go to the host again (0: now)."""
        with self._lock:
            return max(0.0, self._held.get(key, 0.0) - self.clock())

    def holds(self) -> dict[str, float]:
        """The hosts held now for paced requests, with the seconds left."""
        with self._lock:
            now = self.clock()
            return {key: self._until(key) - now for key in {*self._held, *self._crawl_held}
                    if self._until(key) > now}

    def _raise_if_held(self, key: str, now: float) -> None:
        until = self._until(key)
        if until > now:
            raise HostHeldError(key, until - now)

    # -- the fetcher's gate for paced requests (parser.fetch.http.RequestGate) ---------------------
    def before_request(self, url: str) -> None:
        """Inside the host's connection slot, just before sending: a hold set meanwhile counts."""
        with self._lock:
            self._raise_if_held(host_key(url), self.clock())

    def refused(self, url: str, retry_after: float) -> None:
        """The host answered 429/503 with Retry-After: hold it, before its slot is freed."""
        self.hold(url, retry_after)


class SourceRequests:
    """HostSlots as the fetcher's gate for a source's requests (a feed poll, its pages, full text):
    held only by a hold of the whole host, and a refusal holds the host's crawl (see the module)."""

    def __init__(self, slots: HostSlots):
        self.slots = slots

    def before_request(self, url: str) -> None:
        key = host_key(url)
        left = self.slots.key_held_everything_for(key)
        if left > 0:
            raise HostHeldError(key, left)

    def refused(self, url: str, retry_after: float) -> None:
        self.slots.hold_crawl(url, retry_after)
