"""parser/core/cpu_slots.py: parsing runs in at most one thread per core, whatever CONCURRENCY is."""
from __future__ import annotations

import threading

from parser.core import cpu_slots
from parser.core.cpu_slots import cores, one_per_core
from tests.process import wait_for


class CountedSlots:
    """The module's own semaphore, counting the threads that wait for a slot of it."""

    def __init__(self, slots: threading.BoundedSemaphore):
        self.slots, self.waiting, self.lock = slots, 0, threading.Lock()

    def __enter__(self) -> None:
        with self.lock:
            self.waiting += 1
        self.slots.acquire()
        with self.lock:
            self.waiting -= 1

    def __exit__(self, *exc) -> None:
        self.slots.release()


def test_at_most_one_thread_per_core_runs_the_function(monkeypatch):
    slots = CountedSlots(cpu_slots._SLOTS)
    monkeypatch.setattr(cpu_slots, "_SLOTS", slots)
    running, most = 0, 0
    lock = threading.Lock()
    release = threading.Event()

    @one_per_core
    def parse() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(timeout=60)  # held until the test has seen who runs and who waits
        with lock:
            running -= 1

    threads = [threading.Thread(target=parse) for _ in range(4 * cores() + 2)]
    for t in threads:
        t.start()
    try:
        # Every thread is either in the function or waiting for a slot: none is still on its way.
        wait_for(lambda: running + slots.waiting == len(threads), "every thread running or waiting for a slot")
        assert running == cores() and slots.waiting == len(threads) - cores()
    finally:
        release.set()
        for t in threads:
            t.join()
    assert most == cores()
