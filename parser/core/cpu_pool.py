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
pool. A process that dies (a body that crashes a C parser, the kernel's OOM killer) is replaced and the
work asked once more, so only a body that kills it twice fails (ProcessDiedError). Work that runs past
the pool's `timeout` has its process ended (ParseTimeoutError): the only place a runaway parse (nh3's
cost grows with the square of an entry's nesting) can be stopped, since a thread cannot be. Each
process does one piece of work at a time over its own pipe, so ending one ends no one else's work.
"""
from __future__ import annotations

import contextlib
import copyreg
import gc
import multiprocessing
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

from .cpu_slots import cores
from .memory import free_heap_bytes, give_large_blocks_back, trim_heap

T = TypeVar("T")
# A source's settings hold read-only mappings (its headers, a JSON API's map); pickled as the dict they show.
def _read_only(mapping: dict) -> MappingProxyType:
    return MappingProxyType(mapping)


copyreg.pickle(MappingProxyType, lambda proxy: (_read_only, (dict(proxy),)))
TASKS_PER_PROCESS = 2000  # a process is replaced after this many bodies: what a leak or fragmentation holds goes
# On demand: how long (seconds) work may wait for a thread of the daemon's own before the processes start. A
# body takes a few ms: a steady poll's changed feeds seldom wait this long, a first poll's queue soon does.
WAIT_FOR_A_THREAD = 0.5


class ProcessDiedError(Exception):
    """The process doing this work died, twice (the work itself killed it, most likely)."""


class _DiedError(Exception):
    """The pipe to a parse process broke: the process has died."""


class ParseTimeoutError(ProcessDiedError):
    """The work ran past the pool's time limit: its process was ended (or, in a thread, its result refused)."""


# A pool process hands what malloc holds free back to the system (glibc keeps freed memory for later use: a
# body of several MiB would leave the process that large for good) when no work came for IDLE_BEFORE_TRIM
# seconds, or when more than TRIM_ABOVE bytes lie free. Not after every body: the next body then faults the
# same pages in again (a first poll of 1,000 real feeds: 500,000 page faults, 1.0 CPU s of its 12; docs/benchmarks.md).
IDLE_BEFORE_TRIM = 0.05
TRIM_ABOVE = 64 << 20


def _trim_if_idle_or_large(conn: Connection) -> None:
    if not conn.poll(IDLE_BEFORE_TRIM):
        trim_heap()
        return
    free = free_heap_bytes()
    if free is None or free > TRIM_ABOVE:
        trim_heap()


def _child_start(daemon: int) -> None:
    # What the forkserver loaded is shared with it until written to: a collection scanning those objects
    # would write to each one's header, so they are set aside from the collector for good.
    gc.freeze()
    give_large_blocks_back()  # as the daemon's own process does (parser/core/memory.py): 25 MiB less PSS a first poll
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


def _serve(conn: Connection, daemon: int) -> None:
    """A parse process: one piece of work at a time from `conn`, its value or exception sent back."""
    _child_start(daemon)
    while True:
        _trim_if_idle_or_large(conn)
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        work, args, kwargs = task
        try:
            answer = ("ok", work(*args, **kwargs))
        except BaseException as exc:  # the work's own error goes back to the thread that asked
            answer = ("error", exc)
        try:
            conn.send(answer)
        except Exception as exc:  # an unpicklable value or exception: said in words
            conn.send(("error", RuntimeError(f"{type(exc).__name__}: {exc} (sending back {answer[0]})")))


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    tasks: int = 0
    ended: bool = False

    def end(self, *, kill: bool) -> None:
        """Ended at once (kill: a runaway parse) or asked to leave after its work (the pool closing)."""
        if self.ended:
            return
        self.ended = True
        if kill:
            self.process.kill()
        else:
            with contextlib.suppress(OSError):
                self.conn.send(None)
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


# The folder holding this copy of the package (parser/core/cpu_pool.py -> its checkout).
_CHECKOUT = str(Path(__file__).resolve().parents[2])


def _our_code_first() -> None:
    """The forkserver, and so every parse process, imports this very copy of the package. Python 3.11's
    forkserver is handed the daemon's sys.path and drops it (it imports with a bare interpreter's path): a
    daemon started from one checkout (an old release tried beside the installed one, a second working
    tree) parsed with the installed copy's code, one version storing records the other made. Its PYTHONPATH
    is inherited, so this checkout goes first there."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if not paths or paths[0] != _CHECKOUT:
        os.environ["PYTHONPATH"] = os.pathsep.join([_CHECKOUT, *(p for p in paths if p != _CHECKOUT)])


class CpuPool:
    def __init__(self, processes: int, preload: tuple[str, ...] = (), *, on_demand: bool = False,
                 timeout: float | None = None):
        """`processes` 0: the work runs in the calling thread. `preload`: modules the forkserver imports
        once, so that a new process starts without importing them. `on_demand`: the processes start
        only when work waits for one of the threads that may do it here (one per core). `timeout`: work
        running longer is abandoned (ParseTimeoutError): its process ended; in a thread, which nothing
        can stop, its result refused and the processes used from then on."""
        self.processes = processes
        self.preload = preload
        self.timeout = timeout
        # Until work waits for a thread (one per core does it here), it is done here: the processes
        # start only when parsing needs more than this process gives it (a first poll of many feeds),
        # not for the few bodies of a steady poll, where their start would cost more than they save.
        self._here = threading.BoundedSemaphore(cores()) if on_demand else None
        self._here_since: dict[int, float] = {}  # thread id -> when its work here began
        self._started = False      # the processes are in use (on demand: the threads are no longer asked)
        self._started_all = False  # the first work started them all
        self._idle: list[_Worker] = []
        self._count = 0  # processes running, idle or busy
        self._changed = threading.Condition()
        self._closed = False

    def run(self, work: Callable[..., T], /, *args, **kwargs) -> T:
        """work(*args, **kwargs), in a pool process (`work` and its arguments picklable) or here.
        Exceptions `work` raises come back as they are."""
        if not self.processes:
            return self._timed_here(work, args, kwargs)
        if not self._started and self._here is not None and not self._runaway_here() \
                and self._here.acquire(timeout=WAIT_FOR_A_THREAD):
            try:  # the processes are not needed yet: a thread of this process is free to do it
                return self._timed_here(work, args, kwargs)
            finally:
                self._here.release()
        for attempt in (1, 2):
            worker = self._take()
            try:
                return self._ask(worker, work, args, kwargs)
            except _DiedError:  # under the work (a crash in a C parser, the OOM killer), or before it
                worker.end(kill=True)
                if attempt == 2:
                    raise ProcessDiedError("the parse process died while reading it, twice (a crash in a parser, "
                                           "or out of memory)") from None
            finally:
                self._give_back(worker)
        raise AssertionError("unreachable")

    def _timed_here(self, work: Callable[..., T], args: tuple, kwargs: dict) -> T:
        """The work in this thread. Nothing can stop a thread: work that ran past the limit is refused
        when it ends, and while it runs _runaway_here sends the other work to the processes."""
        me = threading.get_ident()
        began = self._here_since[me] = time.monotonic()
        try:
            value = work(*args, **kwargs)
        finally:
            del self._here_since[me]
        took = time.monotonic() - began
        if self.timeout and took > self.timeout:
            raise ParseTimeoutError(f"parsing took {took:.0f} s, over the {self.timeout:g} s limit (in a thread, "
                                    "where it cannot be stopped: parse processes would have ended it): refused")
        return value

    def _runaway_here(self) -> bool:
        """True when work here has run past the limit: from then on every body goes to the processes,
        where a runaway parse can be ended, and the threads it holds are not waited for."""
        if not self.timeout:
            return False
        now = time.monotonic()
        if not any(now - began > self.timeout for began in list(self._here_since.values())):
            return False
        self._started = True
        return True

    def _ask(self, worker: _Worker, work: Callable[..., T], args: tuple, kwargs: dict) -> T:
        try:
            worker.conn.send((work, args, kwargs))
            worker.tasks += 1
            if self.timeout and not worker.conn.poll(self.timeout):
                worker.end(kill=True)  # a runaway parse: the only way to stop it, and it stops only its own work
                raise ParseTimeoutError(f"parsing took longer than the {self.timeout:g} s limit: abandoned, its "
                                        "process ended")
            kind, value = worker.conn.recv()
        except (EOFError, OSError):
            raise _DiedError from None
        if kind == "error":
            raise value
        return value

    def _take(self) -> _Worker:
        """An idle process, or a new one while there are fewer than `processes`; else wait for one.
        The first work starts them all, as ProcessPoolExecutor did."""
        with self._changed:
            while True:
                if self._closed:
                    raise ProcessDiedError("the parse processes are closed: the daemon is stopping")
                if self._idle:
                    return self._idle.pop()
                if self._count < self.processes:
                    break
                self._changed.wait()
            wanted = 1 if self._started_all else self.processes - self._count
            self._count += wanted
            self._started = self._started_all = True
        workers: list[_Worker] = []
        try:
            workers = [self._spawn() for _ in range(wanted)]
        finally:
            with self._changed:
                self._count -= wanted - len(workers)
                self._changed.notify_all()
        for worker in workers[1:]:
            self._give_back(worker)
        return workers[0]

    def _spawn(self) -> _Worker:
        _our_code_first()
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(self.preload))
        mine, theirs = context.Pipe()
        process = context.Process(target=_serve, args=(theirs, os.getpid()), name="parse", daemon=True)
        process.start()
        theirs.close()
        return _Worker(process, mine)

    def _give_back(self, worker: _Worker) -> None:
        """Back to the idle ones; one ended, or one that did TASKS_PER_PROCESS (what a leak or
        fragmentation holds goes with it), or any once the pool is closing, leaves its place."""
        with self._changed:
            if not worker.ended and worker.tasks < TASKS_PER_PROCESS and not self._closed:
                self._idle.append(worker)
                # One process free: one waiting thread can take it. notify_all woke every thread waiting
                # (30 of a first poll's 32) for each body, and all but one went back to waiting.
                self._changed.notify()
                return
        worker.end(kill=False)
        with self._changed:
            self._count -= 1
            self._changed.notify_all()

    def close(self) -> None:
        """Wait for the work under way, then end the processes."""
        with self._changed:
            self._closed = True
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            self._changed.notify_all()
        for worker in idle:
            worker.end(kill=False)
        with self._changed:
            ended = self._changed.wait_for(lambda: self._count <= 0, timeout=(self.timeout or 60) + 10)
        if ended and self._started_all:
            _stop_helpers()


def _stop_helpers() -> None:
    """The forkserver and the resource tracker ended with the pool that started them (the daemon has one):
    they hold 25 MiB PSS, which a --once's last flush, the peak of a first poll of 10,000 feeds, no longer
    holds beside its own. A later pool starts them again. Their `_stop` is what CPython's own tests call."""
    for helper in (multiprocessing.forkserver._forkserver, multiprocessing.resource_tracker._resource_tracker):
        stop = getattr(helper, "_stop", None)
        if stop is not None:
            with contextlib.suppress(OSError):
                stop()


AUTO_MIN_SOURCES = 20


def default_processes(sources: int) -> int:
    """PARSE_PROCESSES "auto" (on demand): one per core where there are two or more (one core gains
    nothing) and the project polls AUTO_MIN_SOURCES or more; else one, which a few feeds never start
    (their start, 0.2 s, and memory, about 40 MiB, for nothing) until a body waits for a thread, or a
    parse in a thread runs past its time limit: a runaway parse can be ended only in a process."""
    count = cores()
    return count if count > 1 and sources >= AUTO_MIN_SOURCES else 1
