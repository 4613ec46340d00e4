"""The one worker loop: work is handed to the worker threads as slots free up, and what they return
comes back to the main thread as it finishes, which absorbs it (the main thread stays the only writer).

At most `workers` items run at once and at most `per_host` of them on one host, as the host's slots
(parser/fetch/host_slots.py, the fetcher's: the same key and count) book them, so no worker ever waits for
a host's connection. When workers are scarce, ready work is taken round-robin across hosts: one host with
5,000 due sources gets one turn in each round like a host with one. A source whose server asked for
a pause (Retry-After) is not due until then (parser/sources/source_schedule.py); work on a host held by a
Retry-After another request received comes back from its worker at once, unsent (HostHeldError):
a job's link waits with the job until the hold ends, a feed poll is held as its own would be.
Whatever is ready but not running holds only a reference to its work; the results waiting for the
main thread are at most `workers`, whatever the number of sources.
"""
from __future__ import annotations

import queue
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .host_slots import HostSlots, host_key


@dataclass(eq=False)
class Work:
    """One unit of work: `run` in a worker thread (it touches no shared state), then `absorb` with its
    result in the main thread; `failed` there instead when `run` raised (a bug, not the network's)."""
    url: str                                   # the first address it fetches: whose host it loads
    run: Callable[[], Any]
    absorb: Callable[[Any], None]
    failed: Callable[[BaseException], None]
    owner: Hashable = None                     # whose work it is (a job), for waiting(owner)/running(owner)


class Scheduler:
    def __init__(self, workers: int, per_host: int, slots: HostSlots | None = None):
        """slots: the fetcher's (the daemon's one place for a host); a scheduler of its own without."""
        self.workers = workers
        self.per_host = per_host
        self.slots = slots if slots is not None else HostSlots(per_host)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fetch")
        # A queue.Queue, not a SimpleQueue: the main thread waits on it with a timeout, and in CPython
        # 3.11 and 3.12 (not 3.13) SimpleQueue.get(timeout=...) waits for good when a signal interrupts
        # the wait and its handler returns after the deadline (the handler, or the GIL on a loaded
        # machine, took the rest of the time): the time left, negative, is taken as "no timeout". A
        # SIGTERM then set the stop, and the main thread stayed in absorb until a result came, which
        # never did in a daemon with only webhook sources (test_listener_abuse's, 1 of 10 make test
        # runs). Queue waits on a lock whose wait gives up then.
        self._done: queue.Queue[tuple[Work, Any, BaseException | None]] = queue.Queue()
        self._ready: dict[str, deque[Work]] = {}   # host -> its work, in the order it came
        self._turns: deque[str] = deque()         # hosts with ready work, in round-robin order
        self._owners_running: Counter[Hashable] = Counter()
        self._owners_waiting: Counter[Hashable] = Counter()
        self.running = 0

    def close(self) -> None:
        """Work still running is abandoned: its result is never absorbed."""
        self.pool.shutdown(wait=False, cancel_futures=True)

    # -- in ------------------------------------------------------------------------------------
    def add(self, work: Work) -> None:
        host = host_key(work.url)
        line = self._ready.get(host)
        if line is None:
            line = self._ready[host] = deque()
            self._turns.append(host)
        line.append(work)
        self._owners_waiting[work.owner] += 1

    def waiting(self, owner: Hashable = None) -> int:
        """Work added and not started yet (of `owner`, or of all when None)."""
        return self._owners_waiting[owner] if owner is not None else sum(self._owners_waiting.values())

    def running_for(self, owner: Hashable) -> int:
        return self._owners_running[owner]

    def idle(self) -> bool:
        return not self.running and not self._turns

    def dispatch(self) -> int:
        """Start ready work while workers are free: one item per host in turn, skipping hosts at their
        PER_HOST limit. Return how many were started."""
        started = 0
        passed = 0  # hosts passed over in a row: a whole round of them and nothing more can start
        while self.running < self.workers and passed < len(self._turns):
            host = self._turns[0]
            self._turns.rotate(-1)  # whatever happens, this host's next turn is after the others'
            line = self._ready[host]
            if not self.slots.book(host):
                passed += 1
                continue
            work = line.popleft()
            if not line:
                del self._ready[host]
                self._turns.pop()  # the host just rotated to the end
            self._owners_waiting[work.owner] -= 1
            self._owners_running[work.owner] += 1
            self.running += 1
            self.pool.submit(self._run, work)
            started += 1
            passed = 0
        return started

    def _run(self, work: Work) -> None:
        """Worker thread."""
        try:
            self._done.put((work, work.run(), None))
        except BaseException as exc:  # noqa: BLE001 (handed to the main thread, which decides)
            self._done.put((work, None, exc))

    # -- out -----------------------------------------------------------------------------------
    def absorb(self, timeout: float, *, limit: int = 256) -> int:
        """Main thread: wait up to `timeout` seconds for finished work, then absorb what has finished
        (at most `limit` items, so the caller's clock-driven work is never kept waiting for long).
        Return how many were absorbed."""
        absorbed = 0
        deadline = time.monotonic() + max(timeout, 0.0)
        while absorbed < limit:
            try:
                if absorbed:
                    work, result, error = self._done.get_nowait()
                else:
                    work, result, error = self._done.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                break
            self._finished(work)
            if error is None:
                work.absorb(result)
            else:
                work.failed(error)
            absorbed += 1
        return absorbed

    def _finished(self, work: Work) -> None:
        self.slots.unbook(host_key(work.url))
        self._owners_running[work.owner] -= 1
        self.running -= 1
