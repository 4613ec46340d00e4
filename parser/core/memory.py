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
from collections.abc import Callable
from functools import cache

M_ARENA_MAX = -8  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
ARENAS = 2
# Blocks from this size (bytes) get pages of their own, given back to the system when freed. glibc's
# threshold starts at 128 KiB but rises to the size of each such block freed (up to 32 MiB): after the
# first large body, bodies of MiBs come from the arenas, and what they leave there holds the daemon's
# memory up (measured over a first poll of 1,000 real feeds: docs/benchmarks.md).
MMAP_THRESHOLD = 256 * 1024


def cap_malloc_arenas(arenas: int = ARENAS) -> bool:
    """Ask glibc for at most `arenas` malloc arenas; call before the worker threads start.
    An operator's MALLOC_ARENA_MAX wins; without glibc (musl, macOS) nothing happens. True if set."""
    return _mallopt(M_ARENA_MAX, arenas, unless="MALLOC_ARENA_MAX")


def give_large_blocks_back(threshold: int = MMAP_THRESHOLD) -> bool:
    """Ask glibc to map blocks of `threshold` bytes and more on their own (see MMAP_THRESHOLD); an
    operator's MALLOC_MMAP_THRESHOLD_ wins; without glibc nothing happens. True if set."""
    return _mallopt(M_MMAP_THRESHOLD, threshold, unless="MALLOC_MMAP_THRESHOLD_")


def _mallopt(option: int, value: int, *, unless: str) -> bool:
    """glibc's mallopt(option, value), left alone when the environment variable `unless` sets it already
    (an operator's choice wins) or there is no glibc. True if set."""
    if os.environ.get(unless):
        return False
    mallopt = _libc_function("mallopt")
    return mallopt is not None and bool(mallopt(option, value))


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


@cache  # looked up once per process: a parse process asks for these around every body
def _libc_function(name: str, restype: type | None = None) -> Callable | None:
    """The C library's function `name` (its result typed `restype`), None where there is none (musl, macOS)."""
    try:
        function = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    if restype is not None:
        function.restype = restype
    return function


def free_heap_bytes() -> int | None:
    """Bytes malloc holds free for later use (glibc 2.33+'s mallinfo2 fordblks); None where it cannot say."""
    mallinfo2 = _libc_function("mallinfo2", _MallInfo2)
    return None if mallinfo2 is None else int(mallinfo2().fordblks)


def trim_heap() -> None:
    """Hand the memory malloc holds free back to the system (glibc's malloc_trim); nothing elsewhere."""
    malloc_trim = _libc_function("malloc_trim")
    if malloc_trim is not None:
        malloc_trim(0)
