"""Parsing is CPU work: at most one thread per core does it at a time.

The daemon fetches with CONCURRENCY worker threads (32 by default), and each parses the body it
fetched. Python code runs one thread at a time (the GIL); lxml and nh3 let go of it, so two cores
are kept busy by two parsing threads. Thirty-two runnable threads do no more work, and every time
the main thread lets go of the GIL (a file read, an fsync) it waits behind them to get it back;
threads waiting for a slot wait on a lock, not for the GIL (figures: docs/benchmarks.md).
"""
from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))  # the cores this process may use (containers, taskset)
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


_SLOTS = threading.BoundedSemaphore(cores())


def one_per_core(function: Callable[..., T]) -> Callable[..., T]:
    """`function` run by at most one thread per core at a time; the others wait for a slot."""
    @functools.wraps(function)
    def limited(*args, **kwargs) -> T:
        with _SLOTS:
            return function(*args, **kwargs)
    return limited
