"""parser/core/cpu_slots.py: parsing runs in at most one thread per core, whatever CONCURRENCY is."""
from __future__ import annotations

import threading
import time

from parser.core.cpu_slots import cores, one_per_core


def test_at_most_one_thread_per_core_runs_the_function():
    running, most = 0, 0
    lock = threading.Lock()

    @one_per_core
    def parse() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02)
        with lock:
            running -= 1

    threads = [threading.Thread(target=parse) for _ in range(4 * cores() + 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == cores()
