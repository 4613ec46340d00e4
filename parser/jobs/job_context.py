"""What the passes of the two-pass jobs share (parser/jobs/pass1.py, parser/jobs/pass2.py): the worker loop, the
fetcher, robots.txt and the hosts' pauses (Retry-After), the run's mode, and how a job says what
happened (parser.log and errors.log, and the job's sink: comment lines among --dry-run's printed
records). What this process is doing with one job now, JobRun, is parser/jobs/job_run.py. Main thread only.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from linkgen.linkfile import MAX_ATTEMPTS
from linkgen.politeness import Robots

from ..core import logs
from ..core.dates import iso
from ..core.runs import RunLog
from ..core.stats import Stats
from ..core.urls import redact_url
from ..fetch.host_slots import HostSlots, host_key
from ..fetch.http import Fetcher
from ..fetch.scheduler import Scheduler
from ..settings.params import Settings
from .job_files import JobFiles
from .job_pace import JobPace
from .job_run import JobRun

log = logging.getLogger("parser")

ONCE_WAIT_MAX = 60.0       # --once: seconds a job waits in all for hosts that asked for a pause
DRY_RUN_LINKS = 20         # --dry-run: objects fetched per job at most


def url_of(item: tuple[int, str]) -> str:
    """A pass-2 link as the frontier queues it, (line, URL): its URL."""
    return item[1]


def utc(epoch: float) -> str:
    return iso(math.ceil(epoch))


@dataclass(frozen=True)
class JobLoop:
    """What the jobs share of the daemon's loop: the fetcher (and its host slots), the scheduler whose work
    items their pages and objects are, the event that stops the daemon, and the wall clock."""
    fetcher: Fetcher
    scheduler: Scheduler
    stop: threading.Event
    clock: Callable[[], float] = time.time


class JobContext:
    """The jobs' share of the daemon: fetcher, scheduler, robots.txt, the hosts' pauses, the mode."""

    def __init__(self, settings: Settings, loop: JobLoop, *, pace: JobPace, links_only: bool, max_objects: int | None,
                 runs: RunLog | None = None, stats: Stats | None = None):
        """`pace`: how the passes pace this run (forever, --once, --once in a group: parser/jobs/job_pace.py)."""
        self.settings = settings
        self.fetcher = fetcher = loop.fetcher
        self.scheduler = loop.scheduler
        self.stop = loop.stop
        self.clock = clock = loop.clock
        self.pace = pace
        self.links_only = links_only
        # None: every pending link; a number (--dry-run's DRY_RUN_LINKS): pass 1 expands a template
        # only as far as that many pending links and pass 2 fetches that many objects a job at most.
        self.max_objects = max_objects
        self.window = settings.concurrency  # a job's pages, and its objects, waiting or running at most
        self.runs = runs if runs is not None else RunLog()  # each pass 2's row of the `runs` table
        self.stats = stats if stats is not None else Stats()  # each pass 2's field coverage (parser/core/coverage.py)
        # The fetcher's own host slots (the group's with SHARED): a hold a feed poll received holds
        # the jobs' requests to that host too, and the reverse.
        self.host_slots: HostSlots = fetcher.slots
        self.robots = Robots(fetcher, settings.user_agent, clock=clock, gate=self.host_slots)
        # The harvest's counts on a terminal only (stderr), drawn so log lines never run into them
        # (parser/core/logs.py).
        self.progress = logs.progress_line()
        self._progress_at = 0.0

    def error(self, files: JobFiles, url: str, what: str, then: str = "") -> None:
        """errors.log: what happened and `then`, what becomes of the link; and the job's sink says what
        happened (--dry-run: a comment line among the printed records; nothing is kept, so no `then`).
        A dry run has no errors.log (parser/core/logs.py): the comment line is all it shows."""
        logs.error_line(files.job.name, url, f"{what}; {then}" if then else what)
        self.say(files, f"{redact_url(url)}: {' '.join(what.split())}")

    def say(self, files: JobFiles, text: str) -> None:
        """A comment line among --dry-run's printed records (a real run's sink says nothing)."""
        files.sink.say(f"{files.job.name}: {text}")

    def show(self, text: str) -> None:
        if self.progress is None or time.monotonic() - self._progress_at < 0.25:
            return
        self._progress_at = time.monotonic()
        self.progress.show(text)

    def end_progress(self) -> None:
        if self.progress is not None and self._progress_at:
            self.progress.clear()
            self._progress_at = 0.0

    def refusal(self, files: JobFiles, url: str, error: str, attempts: int, status: str) -> None:
        """Main thread: a request was refused with Retry-After. Keep the host's hold for a restart and
        say so in parser.log and errors.log."""
        host = host_key(url)
        now = self.clock()
        until = now + self.host_slots.held_for(url)
        files.remember_hold(host, until, now)
        log.info("%s  %s asked for a pause (%s): no request to it before %s", files.job.name, host,
                 error.removeprefix("harvest: "), utc(until))
        then = (f"attempt {attempts} of {MAX_ATTEMPTS}, asked again then" if status != "dead"
                else f"given up after {attempts} attempts")
        self.error(files, url, f"{error}; no request to {host} before {utc(until)} (Retry-After); {then}")

    def hold_left(self, urls: Iterable[str]) -> float:
        """0 when one of `urls` may be fetched now (or there are none); else seconds until one may."""
        holds = self.host_slots.holds()
        if not holds:
            return 0.0
        left = float("inf")
        for url in urls:
            wait_s = holds.get(host_key(url), 0.0)
            if wait_s <= 0:
                return 0.0
            left = min(left, wait_s)
        return 0.0 if left == float("inf") else left

    def hold_or_give_up(self, files: JobFiles, run: JobRun, urls: list[str], what: str, count: int) -> None:
        """--once, only links or pages of held hosts left: wait for the first hold to end if the job's
        budget (ONCE_WAIT_MAX in all) allows, else leave them for the next run."""
        now = time.monotonic()
        if run.waiting(now):
            return  # waiting already
        left = self.hold_left(urls)
        if left <= 0:
            return  # a hold ended meanwhile: the next turn sends them
        if files.waited + left > ONCE_WAIT_MAX:
            hosts = sorted({host_key(u) for u in urls})
            message = (f"{count} {what} wait for {', '.join(hosts)} (Retry-After, {left:.0f} s more): "
                       "left for the next run")
            log.info("%s  %s", files.job.name, message)
            self.say(files, message)
            run.give_up()
            return
        log.info("%s  waiting %.1f s for %s (Retry-After)", files.job.name, left,
                 ", ".join(sorted({host_key(u) for u in urls})))
        files.waited += left
        run.wait_till(now + left)

