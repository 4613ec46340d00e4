"""Two-pass jobs (LINK_JOBS): the runner the daemon calls next to its feed cycle.

Pass 1 writes a job's link file (linkgen: a template, or a harvest from a root page) when it is
due by the job's `interval`; pass 2 fetches each pending link once, extracts the job's fields and
stages one record per object through the job's own Sink (uniqueness, staging CSV, table named
after the job). Worker threads fetch and parse; this module's main-thread half does all writing,
one batch of results at a time, staging records before marking their links done.

A host that answers 429 or 503 with Retry-After is held (linkgen.politeness.HostPacer): nothing is
sent to it before that time, by any job, and the hold is kept in the job's state.json for a restart.
The refused link or page spends one attempt and is asked again when the hold ends; links and pages
that were only kept back spend none. --once waits for holds up to ONCE_WAIT_MAX seconds per job,
then leaves the rest for the next run; forever mode moves on and comes back when the hold ends.

Each job keeps its files in STAGING_DIR/jobs/<name>/ (parser/job_state.py). With --dry-run both
passes run in memory, at most DRY_RUN_LINKS objects per job are fetched, and the records are printed.
"""
from __future__ import annotations

import itertools
import logging
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TextIO

from db.store import Database
from linkgen.frontier import HostFrontier
from linkgen.harvest import PageResult, fetch_page, in_domains
from linkgen.linkfile import MAX_ATTEMPTS, Link, Mark
from linkgen.politeness import HostHeldError, HostPacer, Robots, host_key, polite_get
from linkgen.templates import expand, expand_urls

from . import logs
from .errors import FetchError, ParseError, StorageError
from .extract import extract_fields, parse_html
from .fetch import Fetcher
from .job_settings import LinkJob
from .job_state import JobState, job_folder
from .record import now_iso
from .settings import Settings
from .urls import redact_url

log = logging.getLogger("parser")

SLICE_SECONDS = 30.0      # forever mode: the longest the jobs keep the loop from feeds and flushes
ABSORB_EVERY = 0.05        # seconds: results are staged in batches (one fsync each), at least this often
ABSORB_BATCH = 64
TEMPLATE_CHUNK = 10_000
PENDING_SAMPLE = 1_000     # pending links looked at to tell whether one is on a host not held
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


def _utc(epoch: float) -> str:
    return datetime.fromtimestamp(math.ceil(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class JobRunner:
    def __init__(self, settings: Settings, jobs: list[LinkJob], *, fetcher: Fetcher, pool: ThreadPoolExecutor,
                 stop, clock: Callable[[], float] = time.time, once: bool = False, links_only: bool = False,
                 progress: TextIO | None = None, dry_run: bool = False, out: TextIO | None = None):
        self.settings = settings
        self.jobs = jobs
        self.fetcher = fetcher
        self.pool = pool
        self.stop = stop
        self.clock = clock
        self.once = once or dry_run
        self.links_only = links_only
        self.dry_run = dry_run
        self.out = out if out is not None else sys.stdout
        self.window = settings.concurrency
        self.shared = settings.shared and not dry_run  # the group's links and hosts (parser/shared_jobs.py)
        if self.shared:
            from .shared_jobs import SharedHostPacer
            self.pacer = SharedHostPacer(settings.db_url, stop=stop)
        else:
            self.pacer = HostPacer(stop=stop)
        self.robots = Robots(fetcher, settings.user_agent, clock=clock, gate=self.pacer)
        self.states: list[JobState] = []
        # The harvest's counts on a terminal only, drawn so log lines never run into them (parser/logs.py).
        self.progress = logs.progress_line(progress)
        self._progress_at = 0.0

    # -- life cycle ---------------------------------------------------------------------------
    def open(self) -> None:
        log.info("jobs: %s", ", ".join(f"{j.name} ({'harvest' if j.harvest else 'template'})" for j in self.jobs))
        now = self.clock()
        for job in self.jobs:
            state = self._job_state()(job, self.settings, self.clock, dry_run=self.dry_run, out=self.out)
            recovered = state.recover_staged()
            if recovered:
                log.info("%s  %d links marked done from the staging CSV (their status was cut by a crash)",
                         job.name, recovered)
            for host, until in state.holds.items():
                if until > now:  # a pause a server asked for before the restart still holds
                    self.pacer.hold(host, until - now)
                    log.info("%s  %s asked for no requests before %s (Retry-After): held until then",
                             job.name, host, _utc(until))
            self.states.append(state)

    def _job_state(self) -> type[JobState]:
        if self.shared:
            from .shared_jobs import SharedJobState
            return SharedJobState
        return JobState

    def close(self) -> None:
        for state in self.states:
            state.close()
        self.pacer.close()

    def flush(self, db: Database, why: str) -> bool:
        ok = True
        for state in self.states:
            state.sink.save()  # the Bloom filter, as the feeds' sink does: at flush, not every batch
            try:
                written, already = state.sink.flush(db)
            except StorageError as exc:
                pending = state.sink.staging.pending_rows()
                logs.error_line(state.job.name, "flush", f"{exc}; {pending} records kept in staging for the next flush")
                log.info("flush (%s) of %s failed: %s", why, state.job.name, exc, extra=logs.ALSO_IN_ERRORS)
                ok = False
                continue
            if written or already:
                log.info("flush (%s): %d rows written to %s%s", why, written, state.job.name,
                         f", {already} already stored" if already else "")
        return ok

    def next_due(self) -> float:
        """When run_due has work next: now, when links are pending or a harvest is half done, unless
        every host they are on is held; then when the first hold ends."""
        now = self.clock()
        soonest = float("inf")
        for state in self.states:
            if state.pass1_due(now):
                if not (state.harvest and state.harvest.active):
                    return now
                soonest = min(soonest, now + self._hold_left(state.harvest.level_waiting(self.pacer.key_held_for)))
                continue
            soonest = min(soonest, state.pass1_at + state.job.interval)
            if self.links_only:
                continue
            if state.links.has_pending():
                soonest = min(soonest, now + self._hold_left(self._pending_sample(state)))
            retry = state.links.next_retry()
            if retry is not None:
                soonest = min(soonest, retry)
        return soonest

    def run_due(self) -> None:
        """Run what is due: everything now with --once; else at most about SLICE_SECONDS of work."""
        deadline = None if self.once else time.monotonic() + SLICE_SECONDS
        for state in self.states:
            if self.stop.is_set() or (deadline is not None and time.monotonic() > deadline):
                break
            self._run_job(state, deadline)

    def _run_job(self, state: JobState, deadline: float | None) -> None:
        # --once runs pass 1 now; in a group only when the group's is due and the job's lock is free.
        if (self.once and not self.shared) or state.pass1_due(self.clock()):
            if state.harvest and state.harvest.active and not self.once \
                    and self._hold_left(state.harvest.level_waiting(self.pacer.key_held_for)) > 0:
                return  # every page it could fetch next is on a held host: back when the hold ends
            if state.harvest:
                self._harvest(state, deadline)
                # Stopped, out of time or waiting for a held host half-way: resumed on the next call.
                # --once goes on to pass 2 with the links found so far.
                if state.harvest.active and not self.once:
                    return
            else:
                self._expand_template(state, scheduled=True)
        if self.links_only:
            return
        while not self.stop.is_set():
            tried = self._pass2(state, deadline)
            if self.dry_run or not tried or self.stop.is_set() \
                    or (deadline is not None and time.monotonic() > deadline):
                return
            # An open range goes on as far as pass 2 confirms links; a closed job is done here.
            if state.job.stop_after_misses is None or not self._expand_template(state, scheduled=False):
                return

    # -- pass 1 -------------------------------------------------------------------------------
    def _expand_template(self, state: JobState, *, scheduled: bool) -> int:
        """Add the template's links to the link file; return how many were new."""
        job, links = state.job, state.links
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
            state.pass1_finished(self.clock())
            log.info("%s  pass 1 (template): %d links in the file, %d new%s  %.2f s", job.name, len(links), new,
                     f", {reopened} misses at the end of the range asked again" if reopened else "",
                     time.monotonic() - started)
            self._say(state, f"pass 1 (template): {len(links)} links, {new} new"
                      + (f" (expanded only as far as {DRY_RUN_LINKS + 1} links pending)"
                         if pending_seen > DRY_RUN_LINKS else ""))
        elif new:
            log.info("%s  pass 1 (template): %d more links past the last confirmed one", job.name, new)
        return new + reopened

    def _harvest(self, state: JobState, deadline: float | None) -> None:
        job, harvest, links = state.job, state.harvest, state.links
        started = time.monotonic()
        if not harvest.active:
            harvest.start(len(links))
        else:
            log.info("%s  pass 1: resuming harvest run %d (%d pages done)", job.name, harvest.run, harvest.pages_done)
        inflight: dict[Future, str] = {}
        while not self.stop.is_set():
            if deadline is None or time.monotonic() < deadline:
                for url, depth in harvest.take(self.window - len(inflight), held_for=self.pacer.key_held_for):
                    future = self.pool.submit(fetch_page, url, depth, job.harvest, fetcher=self.fetcher,
                                              pacer=self.pacer, robots=self.robots, delay=job.delay)
                    inflight[future] = url
            if not inflight:
                if harvest.finished() or not self._wait_for_hold(
                        state, harvest.level_waiting(self.pacer.key_held_for), deadline, "pages", harvest.waiting):
                    break
                continue
            done, _ = wait(inflight, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in done:
                url = inflight.pop(future)
                try:
                    result = future.result()
                except Exception as exc:  # a bug in a worker fails that page, not the daemon
                    log.exception("internal error harvesting %s", url)
                    result = PageResult(url=url, depth=harvest.queued[url][0], error=f"internal error: {exc!r}")
                if result.held or (result.error and self.stop.is_set() and result.retry_after is None):
                    harvest.release(url)  # not sent, or cut short by the stop: fetched when the run goes on
                    continue
                if result.retry_after is not None:
                    attempts = harvest.refused(result)
                    self._refusal(state, url, f"harvest: {result.error}", attempts,
                                  "dead" if harvest.out_of_attempts(url) else "refused")
                    if not harvest.out_of_attempts(url):
                        continue  # still queued: asked again when the hold ends
                links.add(harvest.links_of(result))  # the links first: a page is marked done only after
                harvest.record(result)
                if result.error and result.retry_after is None:
                    self._error(state, url, f"harvest: {result.error}")
            self._show(f"{job.name}: pass 1: {harvest.pages_done} pages fetched, {len(links)} links")
        for future, url in inflight.items():
            future.cancel()
            harvest.release(url)
        if self.stop.is_set() or not harvest.finished():
            self._end_progress()
            return
        new = len(links) - harvest.links_before
        summary = (f"{harvest.pages_done} pages fetched ({harvest.failed} failed), {len(links)} links"
                   f"{'' if self.dry_run else ' in the file'}, {new} new")
        if harvest.stopped_at_max:
            summary += f"; stopped at max_pages ({job.harvest.max_pages})"
        state.pass1_finished(self.clock())  # before 'end': a crash between them only ends an empty run again
        harvest.end(summary)
        self._end_progress()
        log.info("%s  pass 1 (harvest run %d): %s  %.2f s", job.name, harvest.run, summary, time.monotonic() - started)
        self._say(state, f"pass 1 (harvest): {summary}")

    # -- pass 2 -------------------------------------------------------------------------------
    def _pass2(self, state: JobState, deadline: float | None) -> int:
        """Fetch the pending links (until the deadline); return how many were tried."""
        job = state.job
        pending = state.links.pending(ignore_backoff=self.once)
        if self.dry_run:
            first = list(itertools.islice(pending, DRY_RUN_LINKS + 1))
            if len(first) > DRY_RUN_LINKS:
                self._say(state, f"more than {DRY_RUN_LINKS} links pending: the dry run fetches the first "
                                 f"{DRY_RUN_LINKS} and stops there")
            pending = iter(first[:DRY_RUN_LINKS])
        # The links are read from the link file as they are sent; a held host's wait apart.
        frontier = HostFrontier(self.pacer.key_held_for, pending, url_of=_url_of)
        tally = Counter()
        empty = Counter()
        started = time.monotonic()
        inflight: dict[Future, tuple[int, str]] = {}
        ready: list[ObjectOutcome] = []
        last_absorb = time.monotonic()
        while not self.stop.is_set():
            while len(inflight) < self.window and (deadline is None or time.monotonic() < deadline):
                item = frontier.pop()
                if item is None:
                    break
                inflight[self.pool.submit(self._fetch_object, state, *item)] = item
            if not inflight:
                if not frontier.parked_count or not self._wait_for_hold(
                        state, [_url_of(i) for i in frontier.parked_hosts().values()], deadline, "links",
                        frontier.parked_count):
                    break
                continue
            done, _ = wait(inflight, timeout=ABSORB_EVERY, return_when=FIRST_COMPLETED)
            for future in done:
                index, url = inflight.pop(future)
                try:
                    outcome = future.result()
                except Exception as exc:  # a bug in a worker fails that link, not the daemon
                    log.exception("internal error fetching %s", url)
                    outcome = ObjectOutcome(url=url, index=index, error=f"internal error: {exc!r}")
                if outcome.held:
                    frontier.park((index, url))
                else:
                    ready.append(outcome)
            if len(ready) >= ABSORB_BATCH or not inflight or time.monotonic() - last_absorb >= ABSORB_EVERY:
                for item in self._absorb(state, ready, tally, empty):
                    frontier.park(item)
                ready, last_absorb = [], time.monotonic()
                counts = state.links.counts()
                self._show(f"{job.name}: pass 2: {counts['done']} objects done, {counts['pending']} pending")
        for future in inflight:
            future.cancel()
        self._absorb(state, ready, tally, empty)  # finished work is kept even when stopping
        self._end_progress()
        tried = sum(tally[k] for k in ("done", "gone", "retry", "dead", "refused"))
        if not tally:
            return 0
        counts = state.links.counts()
        empties = ", ".join(f"{name} {n}" for name, n in empty.most_common())
        log.info("%s  pass 2: %d fetched: %d new, %d duplicates, %d gone (404/410), %d to retry, %d given up%s; "
                 "empty fields: %s; %d pending  %.2f s", job.name, tried, tally["new"], tally["duplicates"],
                 tally["gone"], tally["retry"], tally["dead"],
                 f", {tally['refused']} refused with Retry-After" if tally["refused"] else "",
                 empties or "none", counts["pending"], time.monotonic() - started)
        failed = tried - tally["done"]
        self._say(state, f"{tried} links fetched: {tally['done']} records, {tally['new']} new would be staged"
                         + (f", {failed} failed" if failed else ""))
        return tried

    @staticmethod
    def _pending_sample(state: JobState) -> Iterator[str]:
        """Some pending links, enough to tell whether one is on a host not held: those tried before,
        then the next untried ones (nothing is handed out; read only when a host is held)."""
        return (url for _, url in itertools.islice(state.links.pending(hand_out=False), PENDING_SAMPLE))

    def _fetch_object(self, state: JobState, index: int, url: str) -> ObjectOutcome:
        """Worker thread: fetch one object page (line `index` of the link file) and extract its fields.
        Touches no file."""
        try:
            harvest = state.job.harvest
            response = polite_get(url, fetcher=self.fetcher, pacer=self.pacer, delay=state.job.delay,
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
        extracted = extract_fields(doc, state.selectors)
        record = {"url": url, "fetched": now_iso(self.clock), **extracted.values}
        return ObjectOutcome(url=url, index=index, record=record, empty=extracted.empty)

    def _absorb(self, state: JobState, ready: list[ObjectOutcome], tally: Counter,
                empty: Counter) -> list[tuple[int, str]]:
        """Main thread: stage the records (durably), then mark their links; log the failures. Return the
        refused links (line, URL) that may be asked again (after their host's hold)."""
        ready = [o for o in ready if not o.abandoned]
        if not ready:
            return []
        staged = state.sink.stage([o.record for o in ready if o.record is not None])
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
        for mark, link_state in state.links.mark(marks):
            tally[link_state.status] += 1
            if mark.status == "done":
                continue
            if mark.status == "refused":
                self._refusal(state, mark.url, mark.detail, link_state.attempts, link_state.status)
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
            self._error(state, mark.url, what)
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

    def _refusal(self, state: JobState, url: str, error: str, attempts: int, status: str) -> None:
        """Main thread: a request was refused with Retry-After. Keep the host's hold for a restart and
        say so in parser.log and errors.log."""
        host = host_key(url)
        now = self.clock()
        until = now + self.pacer.held_for(url)
        state.remember_hold(host, until, now)
        log.info("%s  %s asked for a pause (%s): no request to it before %s", state.job.name, host,
                 error.removeprefix("harvest: "), _utc(until))
        then = (f"attempt {attempts} of {MAX_ATTEMPTS}, asked again then" if status != "dead"
                else f"given up after {attempts} attempts")
        self._error(state, url, f"{error}; no request to {host} before {_utc(until)} (Retry-After); {then}")

    def _wait_for_hold(self, state: JobState, urls: list[str], deadline: float | None, what: str,
                       count: int | None = None) -> bool:
        """Nothing in flight and only held hosts left: under --once sleep until the first hold ends, if
        the job's wait budget allows (True: slept, go on); forever mode returns at once (the daemon's
        loop comes back when the hold ends, see next_due)."""
        if not urls or deadline is not None:
            return False
        left = self._hold_left(urls)
        if left <= 0:
            return True  # a hold ended meanwhile
        if state.waited + left > ONCE_WAIT_MAX:
            hosts = sorted({host_key(u) for u in urls})
            message = (f"{count or len(urls)} {what} wait for {', '.join(hosts)} (Retry-After, {left:.0f} s more): "
                       "left for the next run")
            log.info("%s  %s", state.job.name, message)
            self._say(state, message)
            return False
        log.info("%s  waiting %.1f s for %s (Retry-After)", state.job.name, left,
                 ", ".join(sorted({host_key(u) for u in urls})))
        if self.stop.wait(left + 0.01):
            return False
        state.waited += left
        return True

    # -- what a person sees -------------------------------------------------------------------
    def _error(self, state: JobState, url: str, what: str) -> None:
        """errors.log, or with --dry-run a comment line among the printed records."""
        if self.dry_run:
            print(f"# {state.job.name}: {redact_url(url)}: {' '.join(what.split())}", file=self.out)
        else:
            logs.error_line(state.job.name, url, what)

    def _say(self, state: JobState, text: str) -> None:
        """--dry-run only: a comment line among the printed records."""
        if self.dry_run:
            print(f"# {state.job.name}: {text}", file=self.out)
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
