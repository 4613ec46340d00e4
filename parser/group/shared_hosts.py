"""SHARED = True: a host's slots for the whole group, not per daemon: SharedHostSlots, HostSlots
(parser/fetch/host_slots.py) whose connections, paced moments and Retry-After holds are the group's.

Connections (SQL in db/coord.py, parser_host_slots): a fetch first takes this machine's slot of
its host (HostSlots' semaphore, so the threads of one daemon do not queue in the database), then one
of the host's PER_HOST rows in the shared table, and gives both back when its request is done. When
every row is held by other daemons the worker joins the host's line (parser_host_waits: a free slot
goes to the longest waiting first, not to the daemon that just freed it) and asks again every
SLOT_POLL seconds until the fetch's deadline, then the fetch fails with HostBusyError (abandoned,
not a failure of the source, when the daemon is stopping). While the database is away only the
local semaphore holds, as SharedRateLimits falls back to this daemon's own buckets.

Pacing and holds (SQL in db/coord_jobs.py, parser_hosts): each paced request's moment is booked in
the hosts table (one `delay` apart across the group) and Retry-After holds are written there, whoever
received them (a feed poll, a job's page or object); every daemon reads the holds at most
HOLD_REFRESH old.
"""
from __future__ import annotations

import logging
import threading
import time

from db.coord import PerThread
from db.coord_jobs import JobTables

from ..core.errors import FetchError, StorageError
from ..fetch.host_slots import HostHeldError, HostSlots, Slot, fetch_cut, host_key
from ..fetch.http import HostBusyError

log = logging.getLogger("parser")
SLOT_POLL = 0.05  # seconds between asks for a slot of a host busy on other daemons
# A held row's bound past DEADLINE (a fetch holds its slot no longer than its deadline): a killed
# daemon's slot is free when its connection is gone, a lost machine's (connection not yet seen
# gone) after this.
HOLD_MARGIN = 5.0
HOLD_REFRESH = 1.0  # seconds a daemon's view of the group's Retry-After holds may be old


class SharedHostSlots(HostSlots):
    """HostSlots whose connections, bookings and holds are also the group's: at most PER_HOST fetches
    to one host across every daemon sharing the database. Worker threads: a connection each."""

    def __init__(self, db_url: str, per_host: int, deadline: float, stop: threading.Event):
        super().__init__(per_host, stop=stop)
        self.coords = PerThread(db_url)
        self.deadline = deadline
        self.outage = False  # said once per outage
        self._refreshed = float("-inf")
        self._refresh_lock = threading.Lock()

    def make_slot(self, semaphore: threading.BoundedSemaphore, host: str) -> Slot:
        return _GroupSlot(semaphore, host, self)

    def close(self) -> None:
        self.coords.close()

    def _hosts(self) -> JobTables:
        return JobTables(self.coords.get())

    def _refresh(self) -> None:
        """The group's holds into this daemon's (at most HOLD_REFRESH old)."""
        with self._refresh_lock:
            if time.monotonic() - self._refreshed < HOLD_REFRESH:
                return
            self._refreshed = time.monotonic()
        try:
            holds = self._hosts().host_holds()
            crawl_holds = self._hosts().host_holds(crawl_only=True)
        except StorageError:
            return  # the local holds stand until the database answers again
        # HostSlots' own (this class's holds write to the database); host_key again reads a key an
        # older version wrote ("http://a.test:") as today's.
        for key, seconds in holds.items():
            HostSlots.hold_key(self, host_key(key), seconds)
        for key, seconds in crawl_holds.items():
            HostSlots.hold_crawl(self, key, seconds)

    def reserve(self, url: str, delay: float) -> float:
        self._refresh()
        pause = super().reserve(url, 0)  # raises HostHeldError while held (as far as this daemon knows)
        if delay <= 0:
            return pause
        key = host_key(url)
        try:
            wait = self._hosts().reserve_host(key, delay)
        except StorageError as exc:
            raise FetchError(f"not sent: {exc}") from None
        if wait is None:  # another daemon's host hold, newer than this daemon's view
            self._refreshed = float("-inf")
            self._refresh()
            raise HostHeldError(key, self.key_held_for(key))
        return wait

    def hold(self, url: str, seconds: float) -> float:
        return self._tell_group(url, super().hold(url, seconds), crawl_only=False)

    def hold_crawl(self, url: str, seconds: float) -> float:
        return self._tell_group(url, super().hold_crawl(url, seconds), crawl_only=True)

    def _tell_group(self, url: str, held: float, *, crawl_only: bool) -> float:
        """A hold set here, written for the group too (parser_hosts); return its seconds."""
        if held > 0:
            try:
                self._hosts().hold_host(host_key(url), held, crawl_only=crawl_only)
            except StorageError:
                pass  # held here at least; the others hear of it from their own requests
        return held

    def key_held_for(self, key: str) -> float:
        self._refresh()
        return super().key_held_for(key)

    def holds(self) -> dict[str, float]:
        self._refresh()
        return super().holds()

    def before_request(self, url: str) -> None:
        self._refresh()
        super().before_request(url)

    def key_held_everything_for(self, key: str) -> float:
        self._refresh()
        return super().key_held_everything_for(key)


class _GroupSlot(Slot):
    def __init__(self, semaphore: threading.BoundedSemaphore, host: str, slots: SharedHostSlots):
        super().__init__(semaphore, host)
        self.slots = slots
        self.taken: int | None = None

    def take(self) -> None:
        limiter = self.slots
        give_up = time.monotonic() + limiter.deadline
        coords, waited = limiter.coords, False
        try:
            while True:
                self.taken = coords.get().take_host_slot(self.host, limiter.per_host,
                                                         limiter.deadline + HOLD_MARGIN, waiting=waited)
                limiter.outage = False
                if self.taken is not None:
                    return
                if limiter.stop.is_set() or fetch_cut() or time.monotonic() >= give_up:
                    if waited:
                        coords.get().stop_waiting(self.host)
                    raise HostBusyError(f"PER_HOST: host busy on other daemons (all {limiter.per_host} slots "
                                        f"of {self.host} held for {limiter.deadline:g} s)")
                waited = True
                limiter.stop.wait(SLOT_POLL)
        except StorageError as exc:
            if not limiter.outage:
                log.info("shared: %s; PER_HOST holds for this daemon only until the database answers", exc)
            limiter.outage = True

    def give_back(self) -> None:
        if self.taken is None:
            return
        for _ in range(2):  # a dropped connection is opened again for the second try
            try:
                self.slots.coords.get().free_host_slot(self.host, self.taken)
                break
            except StorageError:
                pass  # twice: its hold ends by itself
        self.taken = None
