"""CPU work where the GIL does not serialise it: a small pool of parse processes.

A poll's fetch waits on the network and stays in its thread; parsing, keying and sanitizing a body
is Python and C work that holds the GIL for much of its time, so with threads alone a 2-core machine
parsed on about one core (py-spy over a first --once of 1,000 feeds: median 1.15 cores busy, the main
thread waiting for the GIL behind the parsing threads). A worker thread hands its body to this pool and
waits for the records; the main thread keeps only what must be single (the uniqueness check, the
staging file).

The processes come from a forkserver (never a fork of this many-threaded process: a lock another
thread held at the fork would stay held in the child), with the parsing modules loaded once. They
start at the first work, or with PARSE_PROCESSES "auto" the first time work has waited
WAIT_FOR_A_THREAD for one of the threads that may do it in the daemon's process (one per core): a
first poll of many feeds starts them, the few changed bodies of a steady poll do not (their start,
about 1.2 CPU s, would cost more than they save). They ignore SIGINT and SIGHUP, which a terminal
sends to the whole process group: Ctrl-C and a reload are the daemon's to handle, and it closes the
pool. A process that dies (a body that crashes a C parser, the kernel's OOM killer) breaks the pool:
it is started again and
the work asked once more, so only a body that kills it twice fails (ProcessDiedError).
"""
from __future__ import annotations

import copyreg
import multiprocessing
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from types import MappingProxyType
from typing import TypeVar

from .cpu_slots import cores
from .memory import trim_heap

T = TypeVar("T")
# A source's settings hold read-only mappings (its headers, a JSON API's map); pickled as the dict they show.
def _read_only(mapping: dict) -> MappingProxyType:
    return MappingProxyType(mapping)


copyreg.pickle(MappingProxyType, lambda proxy: (_read_only, (dict(proxy),)))
TASKS_PER_PROCESS = 2000
# On demand: how long work may wait for a thread of the daemon's own before the processes start. A body
# takes a few ms: a steady poll's changed feeds seldom wait this long, a first poll's queue soon does.
WAIT_FOR_A_THREAD = 0.5  # a process is replaced after this many bodies: what a leak or fragmentation holds goes


class ProcessDiedError(Exception):
    """The process doing this work died, twice (the work itself killed it, most likely)."""


def _then_trim(work: Callable[..., T], args: tuple, kwargs: dict) -> T:
    """In a pool process: the work, then what it freed handed back to the system (glibc keeps freed
    memory for later use; a body of several MiB would leave the process that large for good)."""
    try:
        return work(*args, **kwargs)
    finally:
        trim_heap()


def _child_start(daemon: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    threading.Thread(target=_end_with, args=(daemon,), name="end-with-daemon", daemon=True).start()


def _end_with(daemon: int) -> None:
    """End this process when the daemon's ends, however it ends (kill -9 too). Nothing else would: a
    pool process holds both ends of its own work queue, so it never reads an end of file there, and the
    forkserver and the resource tracker wait for the pool processes."""
    try:
        handle = os.pidfd_open(daemon)  # Linux 5.3+: readable when that process has ended
    except (AttributeError, OSError):
        while _alive(daemon):
            time.sleep(2)
    else:
        select.select([handle], [], [])
    os._exit(0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class CpuPool:
    def __init__(self, processes: int, preload: tuple[str, ...] = (), *, on_demand: bool = False):
        """`processes` 0: the work runs in the calling thread. `preload`: modules the forkserver imports
        once, so that a new process starts without importing them. `on_demand`: the processes start
        only when work waits for one of the threads that may do it here (one per core)."""
        self.processes = processes
        self.preload = preload
        self._pool: ProcessPoolExecutor | None = None
        # Until work waits for a thread (one per core does it here), it is done here: the processes
        # start only when parsing needs more than this process gives it (a first poll of many feeds),
        # not for the few bodies of a steady poll, where their start would cost more than they save.
        self._here = threading.BoundedSemaphore(cores()) if on_demand else None
        self._lock = threading.Lock()
        self._closed = False

    def run(self, work: Callable[..., T], /, *args, **kwargs) -> T:
        """work(*args, **kwargs), in a pool process (`work` and its arguments picklable) or here.
        Exceptions `work` raises come back as they are."""
        if not self.processes:
            return work(*args, **kwargs)
        if self._pool is None and self._here is not None and self._here.acquire(timeout=WAIT_FOR_A_THREAD):
            try:  # the processes are not needed yet: a thread of this process is free to do it
                return work(*args, **kwargs)
            finally:
                self._here.release()
        for attempt in (1, 2):
            pool = self._started()
            try:
                return pool.submit(_then_trim, work, args, kwargs).result()
            except BrokenProcessPool:
                self._replace(pool)
                if attempt == 2:
                    raise ProcessDiedError("the parse process died while reading it, twice (a crash in a parser, "
                                      "or out of memory)") from None
        raise AssertionError("unreachable")

    def _started(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise ProcessDiedError("the parse processes are closed: the daemon is stopping")
            if self._pool is None:
                context = multiprocessing.get_context("forkserver")
                context.set_forkserver_preload(list(self.preload))
                self._pool = ProcessPoolExecutor(self.processes, mp_context=context, initializer=_child_start,
                                                 initargs=(os.getpid(),), max_tasks_per_child=TASKS_PER_PROCESS)
            return self._pool

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is broken:
                self._pool = None
        broken.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Wait for the work under way, then end the processes."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


AUTO_MIN_SOURCES = 20


def default_processes(sources: int) -> int:
    """PARSE_PROCESSES "auto": one per core where there are two or more (one core gains nothing) and the
    project polls AUTO_MIN_SOURCES or more; a few feeds never keep one core busy, and the processes
    would cost their start (0.2 s) and memory (about 40 MiB each) for nothing."""
    count = cores()
    return count if count > 1 and sources >= AUTO_MIN_SOURCES else 0
