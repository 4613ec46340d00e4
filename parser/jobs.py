"""Two-pass jobs (LINK_JOBS) on the daemon's one worker loop (parser/scheduler.py).

Pass 1 writes a job's link file (linkgen: a template, or a harvest from a root page) when it is
due by the job's `interval`; pass 2 fetches each pending link once, extracts the job's fields and
stages one record per object through the job's own Sink (uniqueness, staging CSV, table named
after the job). Harvest pages and objects are work items of the scheduler like the feeds' polls, so
pass 2 fetches the links a harvest finds while the harvest goes on, under the same per-host limits.
Pending links are read lazily from the link file (at most CONCURRENCY of a job's objects wait for a
worker). Worker threads fetch and parse; this module's main-thread half does all writing, one batch
of results at a time (a turn of the daemon's loop), staging records before marking their links done.

A host that answers 429 or 503 with Retry-After is held (linkgen.politeness.HostPacer): nothing is
sent to it before that time, by any job, and the hold is kept in the job's state.json for a restart.
The refused link or page spends one attempt and is asked again when the hold ends; links and pages
that were only kept back spend none. --once waits for holds up to ONCE_WAIT_MAX seconds per job,
then leaves the rest for the next run; forever mode moves on and comes back when the hold ends.

Each job keeps its files in STAGING_DIR/jobs/<name>/ (parser/job_files.py). With --dry-run both
passes run in memory, at most DRY_RUN_LINKS objects per job are fetched, and the records are printed.
"""
from __future__ import annotations

import logging
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TextIO

from linkgen.frontier import HostFrontier
from linkgen.harvest import PageResult, fetch_page, in_domains
from linkgen.linkfile import MAX_ATTEMPTS, Link, Mark
from linkgen.politeness import HostHeldError, HostPacer, Robots, host_key, polite_get
from linkgen.templates import expand, expand_urls

from . import logs
from .errors import FetchError, ParseError
from .extract import extract_fields, parse_html
from .fetch import Fetcher
from .job_files import JobFiles, job_folder
from .job_settings import LinkJob
from .record import now_iso
from .scheduler import Scheduler, Work
from .settings import Settings
from .sink import Sink
from .urls import redact_url

log = logging.getLogger("parser")

TEMPLATE_CHUNK = 10_000
REREAD_EVERY = 1.0         # seconds: the link file is asked again this often for retries that came due
PULL_MAX = 10_000          # links pulled at most per look for one on a host not held
SUMMARY_EVERY = 60.0       # seconds: a busy pass 2 says what it did at least this often
ONCE_WAIT_MAX = 60.0       # --once: seconds a job waits in all for hosts that asked for a pause
DRY_RUN_LINKS = 20         # --dry-run: objects fetched per job at most

__all__ = ["DRY_RUN_LINKS", "JobRunner", "job_folder", "select_jobs"]


def select_jobs(settings: Settings, names: tuple[str, ...]) -> list[LinkJob]:
    """Enabled jobs, or exactly the named ones (named but disabled still runs: the user asked)."""
    jobs = getattr(settings, "link_jobs", ())
    if not names:
        return [j for j in jobs if j.enabled]
    by_name = {j.name: j for j in jobs}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"no job named {', '.join(map(repr, unknown))} in {settings.params_path.name}"
                         f" (jobs: {', '.join(by_name) or 'none'})")
    return [by_name[n] for n in dict.fromkeys(names)]


@dataclass
class ObjectOutcome:
    """What a worker hands back for one link of pass 2."""
    url: str
    index: int | None = None  # the link's line in the link file
    record: dict | None = None
    empty: list[str] = field(default_factory=list)
    error: str | None = None
    final: bool = False  # 404/410 (or refused by robots.txt): never asked again
    abandoned: bool = False  # cut short because the daemon is stopping: still pending, no attempt spent
    held: bool = False  # not sent: its host is held (Retry-After); still pending, no attempt spent
    refused: bool = False  # 429/503 with Retry-After: one attempt, asked again when the hold ends


def _url_of(item: tuple[int, str]) -> str:
    return item[1]


@dataclass(eq=False)
class JobRun:
    """What this process does with one job now (main thread): pass 1's progress in this run, and
    pass 2 between the link file and the scheduler."""
    frontier: HostFrontier                     # links pulled from the file, a held host's apart
    name: str
    links: Iterator[tuple[int, str]] | None = None  # the link file's pending links, read as needed
    mine: set[int] = field(default_factory=set)     # lines pulled and not marked: queued, running or parked
    ready: list[ObjectOutcome] = field(default_factory=list)  # finished objects, staged at the next turn
    tally: Counter = field(default_factory=Counter)
    empty: Counter = field(default_factory=Counter)
    started: float = 0.0                       # time.monotonic() of the first fetch since the last summary
    said_at: float = 0.0
    handed: int = 0                            # --dry-run: objects handed out
    seen_links: int = -1                       # len(link file) when its pending links were last asked for
    asked_at: float = 0.0
    drained: bool = False                      # the last look found no link to send now
    tried_since_extend: int = 0                # an open template range goes on after links were tried
    pass1_ran: bool = False                    # --once: pass 1 ran (or was given up) in this run
    harvest_at: float = 0.0                    # time.monotonic() the harvest started or resumed here
    wait_until: float = 0.0                    # --once: waiting for a hold until then (time.monotonic())
    given_up: bool = False                     # --once: the rest waits for a held host: next run

    @property
    def pages(self) -> tuple[str, str]:
        return (self.name, "page")

    @property
    def objects(self) -> tuple[str, str]:
        return (self.name, "object")


def _utc(epoch: float) -> str:
    return datetime.fromtimestamp(math.ceil(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")




class JobRunner:
    def __init__(self, settings: Settings, jobs: list[LinkJob], *, fetcher: Fetcher, scheduler: Scheduler,
                 stop, clock: Callable[[], float] = time.time, once: bool = False, links_only: bool = False,
                 progress: TextIO | None = None, dry_run: bool = False, out: TextIO | None = None):
        self.settings = settings
        self.jobs = jobs
        self.fetcher = fetcher
        self.scheduler = scheduler
        self.stop = stop
        self.clock = clock
        self.once = once or dry_run
        self.links_only = links_only
        self.dry_run = dry_run
        self.out = out if out is not None else sys.stdout
        self.window = settings.concurrency
        self.pacer = HostPacer(stop=stop)
        self.robots = Robots(fetcher, settings.user_agent, clock=clock, gate=self.pacer)
        self.job_files: list[JobFiles] = []
        self.runs: dict[str, JobRun] = {}
        # The harvest's counts on a terminal only, drawn so log lines never run into them (parser/logs.py).
        self.progress = logs.progress_line(progress)
        self._progress_at = 0.0

    # -- life cycle ---------------------------------------------------------------------------
    def open(self) -> None:
        log.info("jobs: %s", ", ".join(f"{j.name} ({'harvest' if j.harvest else 'template'})" for j in self.jobs))
        now = self.clock()
        for job in self.jobs:
            files = JobFiles(job, self.settings, self.clock, dry_run=self.dry_run, out=self.out)
            recovered = files.recover_staged()
            if recovered:
                log.info("%s  %d links marked done from the staging CSV (their status was cut by a crash)",
                         job.name, recovered)
            for host, until in files.holds.items():
                if until > now:  # a pause a server asked for before the restart still holds
                    self.pacer.hold(host, until - now)
                    log.info("%s  %s asked for no requests before %s (Retry-After): held until then",
                             job.name, host, _utc(until))
            self.job_files.append(files)
            self.runs[job.name] = JobRun(HostFrontier(self.pacer.key_held_for, url_of=_url_of), job.name)

    def close(self) -> None:
        for files in self.job_files:
            files.close()

    def sinks(self) -> list[Sink]:
        """The jobs' sinks, flushed by the daemon with its own (Daemon._flush)."""
        return [files.sink for files in self.job_files]

    # -- the daemon's turn --------------------------------------------------------------------
    def offer(self) -> None:
        """Main thread, at every turn of the daemon's loop: stage the objects fetched since the last
        turn, start pass 1 when it is due, and hand pages and links to the scheduler."""
        for files in self.job_files:
            if self.stop.is_set():
                return
            run = self.runs[files.job.name]
            self._stage_objects(files, run)
            self._pass1(files, run)
            if not self.links_only:
                self._offer_links(files, run)
                self._when_idle(files, run)

    def keep_finished(self) -> None:
        """Stopping: what was fetched is staged all the same."""
        for files in self.job_files:
            self._stage_objects(files, self.runs[files.job.name])
        self._end_progress()

    def finished(self) -> bool:
        """--once: every job has done what this run can do."""
        return self.stop.is_set() or all(self._job_finished(files, self.runs[files.job.name])
                                         for files in self.job_files)

    def _job_finished(self, files: JobFiles, run: JobRun) -> bool:
        if self.scheduler.waiting(run.pages) or self.scheduler.running_for(run.pages):
            return False
        if not run.pass1_ran or (files.harvest and files.harvest.active and not run.given_up):
            return False
        return self.links_only or run.given_up or (self._pass2_idle(run) and not run.frontier.parked_count)

    # -- pass 1 -------------------------------------------------------------------------------
    def _pass1(self, files: JobFiles, run: JobRun) -> None:
        due = not run.pass1_ran if self.once else files.pass1_due(self.clock())
        if files.harvest is None:
            if due:
                self._expand_template(files, scheduled=True)
            run.pass1_ran = True
            return
        harvest = files.harvest
        if not harvest.active:
            if not due:
                return
            harvest.start(len(files.links))
            run.harvest_at = time.monotonic()
        elif not run.harvest_at:
            log.info("%s  pass 1: resuming harvest run %d (%d pages done)", files.job.name, harvest.run,
                     harvest.pages_done)
            run.harvest_at = time.monotonic()
        run.pass1_ran = True
        if run.given_up:
            return
        room = self.window - self.scheduler.waiting(run.pages) - self.scheduler.running_for(run.pages)
        job = files.job
        for url, depth in harvest.take(max(room, 0), held_for=self.pacer.key_held_for):
            self.scheduler.add(Work(url=url, owner=run.pages,
                                    run=partial(fetch_page, url, depth, job.harvest, fetcher=self.fetcher,
                                                pacer=self.pacer, robots=self.robots, delay=job.delay),
                                    absorb=partial(self._page_done, files, run),
                                    failed=partial(self._page_crashed, files, run, url, depth)))
        if harvest.finished():
            self._end_harvest(files, run)
        elif self.once and not harvest.taken and harvest.waiting:
            # Only pages on held hosts are left: --once waits for them within its budget.
            self._hold_or_give_up(files, run, harvest.level_waiting(self.pacer.key_held_for), "pages",
                                  harvest.waiting)

    def _page_crashed(self, files: JobFiles, run: JobRun, url: str, depth: int, exc: BaseException) -> None:
        """A bug in a worker fails that page, not the daemon."""
        log.error("internal error harvesting %s: %r", url, exc)
        self._page_done(files, run, PageResult(url=url, depth=depth, error=f"internal error: {exc!r}"))

    def _page_done(self, files: JobFiles, run: JobRun, result: PageResult) -> None:
        """Main thread: one harvest page back from its worker."""
        job, harvest, links, url = files.job, files.harvest, files.links, result.url
        if result.held or (result.error and self.stop.is_set() and result.retry_after is None):
            harvest.release(url)  # not sent, or cut short by the stop: fetched when the run goes on
            return
        if result.retry_after is not None:
            attempts = harvest.refused(result)
            self._refusal(files, url, f"harvest: {result.error}", attempts,
                          "dead" if harvest.out_of_attempts(url) else "refused")
            if not harvest.out_of_attempts(url):
                return  # still queued: asked again when the hold ends
        links.add(harvest.links_of(result))  # the links first: a page is marked done only after
        harvest.record(result)
        if result.error and result.retry_after is None:
            self._error(files, url, f"harvest: {result.error}")
        self._show(f"{job.name}: pass 1: {harvest.pages_done} pages fetched, {len(links)} links")
        if harvest.finished() and not self.stop.is_set():
            self._end_harvest(files, run)

    def _end_harvest(self, files: JobFiles, run: JobRun) -> None:
        job, harvest, links = files.job, files.harvest, files.links
        if not harvest.active:
            return
        new = len(links) - harvest.links_before
        summary = (f"{harvest.pages_done} pages fetched ({harvest.failed} failed), {len(links)} links"
                   f"{'' if self.dry_run else ' in the file'}, {new} new")
        if harvest.stopped_at_max:
            summary += f"; stopped at max_pages ({job.harvest.max_pages})"
        files.pass1_finished(self.clock())  # before 'end': a crash between them only ends an empty run again
        harvest.end(summary)
        self._end_progress()
        log.info("%s  pass 1 (harvest run %d): %s  %.2f s", job.name, harvest.run, summary,
                 time.monotonic() - (run.harvest_at or time.monotonic()))
        run.harvest_at = 0.0
        self._say(files, f"pass 1 (harvest): {summary}")

    def _expand_template(self, files: JobFiles, *, scheduled: bool) -> int:
        """Add the template's links to the link file; return how many were new."""
        job, links = files.job, files.links
        started, before = time.monotonic(), len(links)
        today = datetime.fromtimestamp(self.clock(), UTC).date()
        probes: list[str] = []
        pending_seen = 0
        if job.stop_after_misses is None:
            # A closed template: streamed to the file in chunks, checked against the file in order,
            # never held whole (ten million links cost no more memory than ten thousand).
            def enough(pending: int) -> bool:
                nonlocal pending_seen
                pending_seen = pending
                return pending > DRY_RUN_LINKS  # only the first links pass 2 would fetch are needed
            links.add_template(expand_urls(job.template, job.values, today=today),
                               chunk=TEMPLATE_CHUNK, enough=enough if self.dry_run else None)
        else:
            batch: list[Link] = []
            for made in expand(job.template, job.values, today=today, stop_after_misses=job.stop_after_misses,
                               is_good=lambda url: links.status(url) == "done"):
                batch.append(Link(made.url, None, "template"))
                if made.probe:
                    probes.append(made.url)
                if self.dry_run:
                    pending_seen += made.url not in links or links.status(made.url) == "pending"
                    if pending_seen > DRY_RUN_LINKS:
                        break
                if len(batch) >= TEMPLATE_CHUNK:
                    links.add(batch)
                    batch = []
            links.add(batch)
        new = len(links) - before
        reopened = 0
        if scheduled:
            # The misses that ended an open range are asked again each time pass 1 runs: new ids appear.
            gone = [u for u in probes if links.status(u) == "gone"]
            links.mark(Mark(u, "reopen", "end of an open range: asked again") for u in gone)
            reopened = len(gone)
            files.pass1_finished(self.clock())
            log.info("%s  pass 1 (template): %d links in the file, %d new%s  %.2f s", job.name, len(links), new,
                     f", {reopened} misses at the end of the range asked again" if reopened else "",
                     time.monotonic() - started)
            self._say(files, f"pass 1 (template): {len(links)} links, {new} new"
                      + (f" (expanded only as far as {DRY_RUN_LINKS + 1} links pending)"
                         if pending_seen > DRY_RUN_LINKS else ""))
        elif new:
            log.info("%s  pass 1 (template): %d more links past the last confirmed one", job.name, new)
        return new + reopened


    # -- pass 2 -------------------------------------------------------------------------------
    def _offer_links(self, files: JobFiles, run: JobRun) -> None:
        """Hand pending links to the scheduler, at most CONCURRENCY of this job's waiting or running."""
        if run.given_up:
            return
        room = self.window - self.scheduler.waiting(run.objects) - self.scheduler.running_for(run.objects)
        run.drained = False
        while room > 0:
            if self.dry_run and run.handed >= DRY_RUN_LINKS:
                run.drained = True
                return
            item = self._next_link(files, run)
            if item is None:
                run.drained = True
                return
            index, url = item
            if not run.started:
                run.started = run.said_at = time.monotonic()
            self.scheduler.add(Work(url=url, owner=run.objects,
                                    run=partial(self._fetch_object, files, index, url),
                                    absorb=partial(self._object_done, run),
                                    failed=partial(self._object_crashed, run, index, url)))
            run.handed += 1
            room -= 1
            if self.dry_run and run.handed == DRY_RUN_LINKS and self._next_link(files, run) is not None:
                self._say(files, f"more than {DRY_RUN_LINKS} links pending: the dry run fetches the first "
                                 f"{DRY_RUN_LINKS} and stops there")

    def _next_link(self, files: JobFiles, run: JobRun) -> tuple[int, str] | None:
        """The next link whose host is not held: from the frontier, else pulled from the link file."""
        for _ in range(PULL_MAX):
            item = run.frontier.pop()
            if item is not None:
                return item
            item = self._pull(files, run)
            if item is None:
                return None
            run.frontier.append(item)
        return None

    def _pull(self, files: JobFiles, run: JobRun) -> tuple[int, str] | None:
        """One pending link from the file that is not already ours. The file is asked again when links
        were added (a harvest going on) or, for retries come due, every REREAD_EVERY seconds."""
        while True:
            if run.links is None:
                if len(files.links) == run.seen_links and time.monotonic() - run.asked_at < REREAD_EVERY:
                    return None
                # --once asks again at once for the retries of earlier runs, only on its first look: a link
                # that fails in this run waits for its backoff like any other.
                run.links = files.links.pending(ignore_backoff=self.once and run.seen_links < 0)
                run.seen_links, run.asked_at = len(files.links), time.monotonic()
                fresh = True
            else:
                fresh = False
            for index, url in run.links:
                if index not in run.mine:
                    run.mine.add(index)
                    return index, url
            run.links = None
            if fresh:
                return None

    def _object_crashed(self, run: JobRun, index: int, url: str, exc: BaseException) -> None:
        log.error("internal error fetching %s: %r", url, exc)  # a bug in a worker fails that link only
        run.ready.append(ObjectOutcome(url=url, index=index, error=f"internal error: {exc!r}"))

    def _object_done(self, run: JobRun, outcome: ObjectOutcome) -> None:
        """Main thread: an object back from its worker; staged with the others of this turn."""
        if outcome.held:
            run.frontier.park((outcome.index, outcome.url))  # not sent: asked when the hold ends
        else:
            run.ready.append(outcome)

    def _stage_objects(self, files: JobFiles, run: JobRun) -> None:
        ready, run.ready = run.ready, []
        if not ready:
            return
        again = self._absorb(files, ready, run.tally, run.empty)
        for item in again:
            run.frontier.park(item)  # refused with Retry-After: still ours, asked after the hold
        kept = {index for index, _ in again}
        for outcome in ready:
            if outcome.index not in kept:
                run.mine.discard(outcome.index)  # marked; or abandoned, so the file gives it again
        run.tried_since_extend += len(ready)
        counts = files.links.counts()
        self._show(f"{files.job.name}: pass 2: {counts['done']} objects done, {counts['pending']} pending")
        if run.tally and time.monotonic() - run.said_at >= SUMMARY_EVERY:
            self._pass2_summary(files, run)

    def _pass2_idle(self, run: JobRun) -> bool:
        return run.drained and not run.ready and not self.scheduler.waiting(run.objects) \
            and not self.scheduler.running_for(run.objects)

    def _when_idle(self, files: JobFiles, run: JobRun) -> None:
        """Nothing to send now and nothing in flight: an open range goes on, the tally is said, and
        --once waits for a held host (within ONCE_WAIT_MAX) or leaves its links for the next run."""
        if not self._pass2_idle(run):
            return
        if files.job.stop_after_misses is not None and run.tried_since_extend and not self.dry_run:
            run.tried_since_extend = 0
            if self._expand_template(files, scheduled=False):
                run.drained = False  # the new links go at the next turn
                return
        harvesting = files.harvest is not None and files.harvest.active and not run.given_up
        if run.tally and not harvesting:
            self._pass2_summary(files, run)
        if self.once and run.frontier.parked_count and not harvesting and not run.given_up:
            self._hold_or_give_up(files, run, [_url_of(i) for i in run.frontier.parked_hosts().values()], "links",
                                  run.frontier.parked_count)

    def _pass2_summary(self, files: JobFiles, run: JobRun) -> None:
        job, tally = files.job, run.tally
        tried = sum(tally[k] for k in ("done", "gone", "retry", "dead", "refused"))
        counts = files.links.counts()
        empties = ", ".join(f"{name} {n}" for name, n in run.empty.most_common())
        log.info("%s  pass 2: %d fetched: %d new, %d duplicates, %d gone (404/410), %d to retry, %d given up%s; "
                 "empty fields: %s; %d pending  %.2f s", job.name, tried, tally["new"], tally["duplicates"],
                 tally["gone"], tally["retry"], tally["dead"],
                 f", {tally['refused']} refused with Retry-After" if tally["refused"] else "",
                 empties or "none", counts["pending"], time.monotonic() - run.started)
        failed = tried - tally["done"]
        self._say(files, f"{tried} links fetched: {tally['done']} records, {tally['new']} new would be staged"
                         + (f", {failed} failed" if failed else ""))
        self._end_progress()
        run.tally, run.empty, run.started = Counter(), Counter(), 0.0

    def _fetch_object(self, files: JobFiles, index: int, url: str) -> ObjectOutcome:
        """Worker thread: fetch one object page (line `index` of the link file) and extract its fields.
        Touches no file."""
        try:
            harvest = files.job.harvest
            response = polite_get(url, fetcher=self.fetcher, pacer=self.pacer, delay=files.job.delay,
                                  robots=self.robots if harvest else None,
                                  may_follow=(lambda target: in_domains(target, harvest.allowed_domains))
                                  if harvest else None)
            doc = parse_html(response.body, content_type=response.headers.get("content-type", ""))
        except HostHeldError:
            return ObjectOutcome(url=url, index=index, held=True)
        except FetchError as exc:
            refused = exc.retry_after is not None
            return ObjectOutcome(url=url, index=index, error=str(exc), final=exc.permanent, refused=refused,
                                 abandoned=self.stop.is_set() and not refused)
        except ParseError as exc:
            return ObjectOutcome(url=url, index=index, error=str(exc))
        extracted = extract_fields(doc, files.selectors)
        record = {"url": url, "fetched": now_iso(self.clock), **extracted.values}
        return ObjectOutcome(url=url, index=index, record=record, empty=extracted.empty)

    def _absorb(self, files: JobFiles, ready: list[ObjectOutcome], tally: Counter,
                empty: Counter) -> list[tuple[int, str]]:
        """Main thread: stage the records (durably), then mark their links; log the failures. Return the
        refused links (line, URL) that may be asked again (after their host's hold)."""
        ready = [o for o in ready if not o.abandoned]
        if not ready:
            return []
        staged = files.sink.stage([o.record for o in ready if o.record is not None])
        tally["new"] += len(staged.new)
        tally["duplicates"] += staged.duplicates
        marks = []
        for outcome in ready:
            if outcome.record is not None:
                marks.append(Mark(outcome.url, "done", index=outcome.index))
                empty.update(outcome.empty)
            elif outcome.refused:
                marks.append(Mark(outcome.url, "refused", outcome.error or "", outcome.index))
            else:
                marks.append(Mark(outcome.url, "gone" if outcome.final else "failed", outcome.error or "",
                                  outcome.index))
        again = []
        for mark, link_state in files.links.mark(marks):
            tally[link_state.status] += 1
            if mark.status == "done":
                continue
            if mark.status == "refused":
                self._refusal(files, mark.url, mark.detail, link_state.attempts, link_state.status)
                if link_state.status == "refused":
                    again.append((mark.index, mark.url))
                continue
            if self.dry_run:  # nothing is recorded, so nothing is "asked again later"
                what = mark.detail
            elif link_state.status == "gone":
                what = f"{mark.detail}; not asked again"
            elif link_state.status == "retry":
                what = f"{mark.detail}; attempt {link_state.attempts} of {MAX_ATTEMPTS}, asked again later"
            else:
                what = f"{mark.detail}; given up after {link_state.attempts} attempts"
            self._error(files, mark.url, what)
        return again

    # -- holds (429/503 with Retry-After) -----------------------------------------------------
    def _hold_left(self, urls: Iterable[str]) -> float:
        """0 when one of `urls` may be fetched now (or there are none); else seconds until one may."""
        holds = self.pacer.holds()
        if not holds:
            return 0.0
        left = float("inf")
        for url in urls:
            wait_s = holds.get(host_key(url), 0.0)
            if wait_s <= 0:
                return 0.0
            left = min(left, wait_s)
        return 0.0 if left == float("inf") else left

    def _refusal(self, files: JobFiles, url: str, error: str, attempts: int, status: str) -> None:
        """Main thread: a request was refused with Retry-After. Keep the host's hold for a restart and
        say so in parser.log and errors.log."""
        host = host_key(url)
        now = self.clock()
        until = now + self.pacer.held_for(url)
        files.remember_hold(host, until, now)
        log.info("%s  %s asked for a pause (%s): no request to it before %s", files.job.name, host,
                 error.removeprefix("harvest: "), _utc(until))
        then = (f"attempt {attempts} of {MAX_ATTEMPTS}, asked again then" if status != "dead"
                else f"given up after {attempts} attempts")
        self._error(files, url, f"{error}; no request to {host} before {_utc(until)} (Retry-After); {then}")


    def _hold_or_give_up(self, files: JobFiles, run: JobRun, urls: list[str], what: str, count: int) -> None:
        """--once, only links or pages of held hosts left: wait for the first hold to end if the job's
        budget (ONCE_WAIT_MAX in all) allows, else leave them for the next run."""
        now = time.monotonic()
        if now < run.wait_until:
            return  # waiting already
        left = self._hold_left(urls)
        if left <= 0:
            return  # a hold ended meanwhile: the next turn sends them
        if files.waited + left > ONCE_WAIT_MAX:
            hosts = sorted({host_key(u) for u in urls})
            message = (f"{count} {what} wait for {', '.join(hosts)} (Retry-After, {left:.0f} s more): "
                       "left for the next run")
            log.info("%s  %s", files.job.name, message)
            self._say(files, message)
            run.given_up = True
            return
        log.info("%s  waiting %.1f s for %s (Retry-After)", files.job.name, left,
                 ", ".join(sorted({host_key(u) for u in urls})))
        files.waited += left
        run.wait_until = now + left

    def _error(self, files: JobFiles, url: str, what: str) -> None:
        """errors.log, or with --dry-run a comment line among the printed records."""
        if self.dry_run:
            print(f"# {files.job.name}: {redact_url(url)}: {' '.join(what.split())}", file=self.out)
        else:
            logs.error_line(files.job.name, url, what)

    def _say(self, files: JobFiles, text: str) -> None:
        """--dry-run only: a comment line among the printed records."""
        if self.dry_run:
            print(f"# {files.job.name}: {text}", file=self.out)
            self.out.flush()

    def _show(self, text: str) -> None:
        if self.progress is None or time.monotonic() - self._progress_at < 0.25:
            return
        self._progress_at = time.monotonic()
        self.progress.show(text)

    def _end_progress(self) -> None:
        if self.progress is not None and self._progress_at:
            self.progress.clear()
            self._progress_at = 0.0
