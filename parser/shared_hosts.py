"""SHARED = True: PER_HOST for the whole group, not per daemon (SQL in db/coord.py, parser_host_slots).

A fetch first takes this machine's slot of its host (parser/fetch.py's semaphore, so the threads of
one daemon do not queue in the database), then one of the host's PER_HOST rows in the shared table,
and gives both back when its request is done. When every row is held by other daemons the worker
joins the host's line (parser_host_waits: a free slot goes to the longest waiting first, not to the
daemon that just freed it) and asks again every SLOT_POLL seconds until the fetch's deadline, then
the fetch fails with HostBusyError (abandoned, not a failure of the source, when the daemon is
stopping). While the database is away only the local semaphore holds, as SharedRateLimits falls back
to this daemon's own buckets.
"""
from __future__ import annotations

import logging
import threading
import time

from db.coord import PerThread

from .errors import StorageError
from .fetch import HostBusyError, HostLimiter, _Slot, fetch_cut

log = logging.getLogger("parser")
SLOT_POLL = 0.05  # seconds between asks for a slot of a host busy on other daemons
# A held row's bound past DEADLINE (a fetch holds its slot no longer than its deadline): a killed
# daemon's slot is free when its connection is gone, a lost machine's (connection not yet seen
# gone) after this.
HOLD_MARGIN = 5.0


class SharedHostLimiter(HostLimiter):
    """HostLimiter whose slots are also the group's: at most PER_HOST fetches to one host:port across
    every daemon sharing the database. Worker threads: a connection each."""

    def __init__(self, db_url: str, per_host: int, deadline: float, stop: threading.Event):
        super().__init__(per_host)
        self.coords = PerThread(db_url)
        self.deadline = deadline
        self.stop = stop
        self.outage = False  # said once per outage

    def make_slot(self, semaphore: threading.BoundedSemaphore, host: str) -> _Slot:
        return _GroupSlot(semaphore, host, self)

    def close(self) -> None:
        self.coords.close()


class _GroupSlot(_Slot):
    def __init__(self, semaphore: threading.BoundedSemaphore, host: str, limiter: SharedHostLimiter):
        super().__init__(semaphore, host)
        self.limiter = limiter
        self.taken: int | None = None

    def take(self) -> None:
        limiter = self.limiter
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
                self.limiter.coords.get().free_host_slot(self.host, self.taken)
                break
            except StorageError:
                pass  # twice: its hold ends by itself
        self.taken = None
