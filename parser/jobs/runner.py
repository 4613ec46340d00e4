"""Two-pass jobs (LINK_JOBS) on the daemon's one worker loop (parser/fetch/scheduler.py).

Pass 1 writes a job's link file (linkgen: a template, or a harvest from a root page) when it is
due by the job's `interval`; pass 2 fetches each pending link once, extracts the job's fields and
stages one record per object through the job's own Sink (uniqueness, staging CSV, table named
after the job). Harvest pages and objects are work items of the scheduler like the feeds' polls, so
pass 2 fetches the links a harvest finds while the harvest goes on, under the same per-host limits.
Pending links are read lazily from the link file (at most CONCURRENCY of a job's objects wait for a
worker). Worker threads fetch and parse; the main thread does all writing, one batch of results at a
time (a turn of the daemon's loop), staging records before marking their links done. The passes are
parser/jobs/pass1.py and parser/jobs/pass2.py, what they share parser/jobs/job_context.py; this module opens the
jobs and gives them their turn.

A host that answers 429 or 503 with Retry-After is held (parser/fetch/host_slots.py, HostSlots): nothing is
sent to it before that time, by any job or feed poll, and the hold is kept in the job's state.json for
a restart.
The refused link or page spends one attempt and is asked again when the hold ends; links and pages
that were only kept back spend none. --once waits for holds up to ONCE_WAIT_MAX seconds per job,
then leaves the rest for the next run; forever mode moves on and comes back when the hold ends.

Each job keeps its files in STAGING_DIR/jobs/<name>/ (parser/jobs/job_files.py). With --dry-run both
passes run in memory, at most DRY_RUN_LINKS objects per job are fetched, and the records are printed.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from linkgen.frontier import HostFrontier

from ..core.runs import RunLog
from ..core.stats import Stats
from ..pipeline.sink import RecordSink
from ..settings.link_jobs import LinkJob
from ..settings.params import Settings
from .job_context import JobContext, JobLoop, url_of, utc
from .job_files import JobFiles, job_folder
from .job_pace import Continuous, JobPace
from .job_run import JobRun
from .pass1 import Pass1
from .pass2 import Pass2

log = logging.getLogger("parser")

__all__ = ["JobLoop", "JobMode", "JobParts", "JobRunner", "job_folder"]


@dataclass(frozen=True)
class JobMode:
    """What the run asks of the jobs: --links-only (pass 1 only)."""
    links_only: bool = False


# How a job's files are opened: (job, settings, clock) -> its files.
OpenFiles = Callable[[LinkJob, Settings, Callable[[], float]], JobFiles]


@dataclass(frozen=True)
class JobParts:
    """What the daemon's parts (parser/group/parts.py, a floor above this one) choose for the jobs: how a job's
    files open (with SHARED the group's, parser/group/shared_jobs.py; a dry run's in memory, printing their
    records), how the passes pace the run (forever, --once, --once in a group: parser/jobs/job_pace.py), and
    how many objects a job fetches at most (None: all)."""
    job_files: OpenFiles = JobFiles
    pace: JobPace = field(default_factory=Continuous)
    max_objects: int | None = None


class JobRunner:
    def __init__(self, settings: Settings, jobs: list[LinkJob], loop: JobLoop, *, mode: JobMode = JobMode(),
                 parts: JobParts = JobParts(), runs: RunLog | None = None, stats: Stats | None = None):
        """`parts`: how the jobs' files open (a dry run's in memory, printing their records:
        parser/jobs/job_files.py) and how many objects a job fetches; the passes themselves do not know.
        `runs`: where each pass 2's row of the `runs` table goes (the daemon's RunInfo.runs); `stats`: the
        daemon's stats object (parser/core/stats.py), which keeps each pass 2's field coverage."""
        self.settings = settings
        self.open_files = parts.job_files
        self.jobs = jobs
        self.ctx = JobContext(settings, loop, pace=parts.pace, links_only=mode.links_only,
                              max_objects=parts.max_objects, runs=runs, stats=stats)
        self.pass1 = Pass1(self.ctx)
        self.pass2 = Pass2(self.ctx, self.pass1)
        self.job_files: list[JobFiles] = []
        self.runs: dict[str, JobRun] = {}

    # -- life cycle ---------------------------------------------------------------------------
    def open(self) -> None:
        ctx = self.ctx
        log.info("jobs: %s", ", ".join(f"{j.name} ({'harvest' if j.harvest else 'template'})" for j in self.jobs))
        now = ctx.clock()
        for job in self.jobs:
            files = self.open_files(job, self.settings, ctx.clock)
            if job.refresh and not files.revisits:
                log.warning("%s  refresh is not applied with SHARED = True (the group's link table keeps no "
                            "revisit times yet): each object is fetched once", job.name)
            recovered = files.recover_staged()
            if recovered:
                log.info("%s  %d links marked done from the staging CSV (their status was cut by a crash)",
                         job.name, recovered)
            for host, until in files.holds.items():
                if until > now:  # a pause a server asked for before the restart still holds
                    ctx.host_slots.hold(host, until - now)
                    log.info("%s  %s asked for no requests before %s (Retry-After): held until then",
                             job.name, host, utc(until))
            self.job_files.append(files)
            self.runs[job.name] = JobRun(job.name, HostFrontier(ctx.host_slots.key_held_for, url_of=url_of))

    def close(self) -> None:
        for files in self.job_files:
            files.close()
        self.ctx.host_slots.close()

    def sinks(self) -> list[RecordSink]:
        """The jobs' sinks, flushed by the daemon with its own (Daemon.flush)."""
        return [files.sink for files in self.job_files]

    # -- the daemon's turn (parser/collectors.py) ----------------------------------------------
    def take_pushed(self) -> None:
        """Nothing is pushed to a job."""

    def next_due(self) -> float:
        return math.inf  # the loop's CONTROL_TICK is as long as it waits: a job's work is offered each turn

    def save(self, *, force: bool = False) -> bool:
        return False  # a job's files write themselves as its links and holds change (parser/jobs/job_files.py)

    def summary(self, *, due_only: bool = False) -> None:
        """A job's lines are said as its passes go (parser/jobs/pass1.py, pass2.py)."""

    def offer(self) -> None:
        """Main thread, at every turn of the daemon's loop: start pass 1 when it is due, and hand pages
        and links to the scheduler."""
        for files in self.job_files:
            if self.ctx.stop.is_set():
                return
            run = self.runs[files.job.name]
            self.pass1.step(files, run)
            if not self.ctx.links_only:
                self.pass2.offer(files, run)
                self.pass2.when_idle(files, run)

    def stage(self) -> None:
        """Main thread, after the scheduler's absorb: the objects fetched this turn, staged and marked."""
        for files in self.job_files:
            self.pass2.stage(files, self.runs[files.job.name])

    def keep_finished(self) -> None:
        """Stopping: what was fetched is staged all the same."""
        self.stage()
        self.ctx.end_progress()

    def finished(self) -> bool:
        """--once: every job has done what this run can do."""
        return self.ctx.stop.is_set() or all(self._job_finished(files, self.runs[files.job.name])
                                             for files in self.job_files)

    def _job_finished(self, files: JobFiles, run: JobRun) -> bool:
        scheduler = self.ctx.scheduler
        if scheduler.waiting(run.pages) or scheduler.running_for(run.pages):
            return False
        if not run.pass1_ran or (files.harvest and files.harvest.active and not run.given_up):
            return False
        return self.ctx.links_only or run.given_up or (self.pass2.idle(run) and not run.parked_count)
