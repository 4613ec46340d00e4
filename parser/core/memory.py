"""Peak memory that follows CONCURRENCY, not the number of sources: glibc's malloc arenas capped.

glibc gives a thread that allocates while another holds the lock its own arena, up to eight per
core, and an arena keeps what was freed in it for its own thread's later use. Worker threads parse
bodies of hundreds of kilobytes with lxml and nh3 (C, without the GIL, so they do allocate at the
same time): two arenas halve the peak at the same speed, as Python code runs one thread at a time
anyway (figures: docs/benchmarks.md).
"""
from __future__ import annotations

import ctypes
import os

M_ARENA_MAX = -8  # glibc's malloc.h
ARENAS = 2


def cap_malloc_arenas(arenas: int = ARENAS) -> bool:
    """Ask glibc for at most `arenas` malloc arenas; call before the worker threads start.
    An operator's MALLOC_ARENA_MAX wins; without glibc (musl, macOS) nothing happens. True if set."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))


def trim_heap() -> None:
    """Hand the memory malloc holds free back to the system (glibc's malloc_trim); nothing elsewhere."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass
